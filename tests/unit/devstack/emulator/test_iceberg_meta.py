"""Commit semantics come from pyiceberg: requirements, updates, metadata file names, locks."""

from __future__ import annotations

import asyncio
import re
import uuid

import pytest
from pyiceberg.exceptions import CommitFailedException
from pyiceberg.schema import Schema
from pyiceberg.types import LongType, NestedField

from devstack.emulator.iceberg_meta import (
    CommitIcebergTable,
    CreateIcebergTable,
    TableLocks,
    apply_commit,
    create_metadata,
    dump_metadata,
    metadata_file_location,
    parse_metadata,
    write_metadata,
)

LOCATION = "s3://b/pre/t1"
FILE_RE = re.compile(r"^s3://b/pre/t1/metadata/(\d{5})-[0-9a-f-]{36}\.metadata\.json$")


def _created():
    schema = Schema(NestedField(1, "id", LongType(), required=False))
    req = CreateIcebergTable.model_validate({"name": "t1", "schema": schema.model_dump()})
    table_id = str(uuid.uuid4())
    return create_metadata(req, LOCATION, table_id), table_id


def _commit(body: dict) -> CommitIcebergTable:
    return CommitIcebergTable.model_validate(body)


def test_create_uses_the_catalog_id_as_table_uuid_and_names_version_zero():
    meta, table_id = _created()
    assert str(meta.table_uuid) == table_id
    assert meta.location == LOCATION
    match = FILE_RE.match(metadata_file_location(meta, 0))
    assert match is not None
    assert match.group(1) == "00000"


def test_commit_applies_updates_and_names_the_next_version():
    meta, _ = _created()
    base_loc = metadata_file_location(meta, 0)
    body = {
        "requirements": [{"type": "assert-table-uuid", "uuid": str(meta.table_uuid)}],
        "updates": [{"action": "set-properties", "updates": {"owner": "me"}}],
    }
    new, new_loc = apply_commit(meta, base_loc, _commit(body))
    assert new.properties["owner"] == "me"
    match = FILE_RE.match(new_loc)
    assert match is not None
    assert match.group(1) == "00001"
    # the previous file is recorded in the metadata log
    assert [e.metadata_file for e in new.metadata_log] == [base_loc]
    # what is stored is what is parsed back
    assert parse_metadata(dump_metadata(new)).properties == new.properties


def test_stale_requirement_is_a_commit_failure():
    meta, _ = _created()
    body = {
        "requirements": [{"type": "assert-table-uuid", "uuid": str(uuid.uuid4())}],
        "updates": [{"action": "set-properties", "updates": {"k": "v"}}],
    }
    with pytest.raises(CommitFailedException):
        apply_commit(meta, metadata_file_location(meta, 0), _commit(body))


def test_stale_snapshot_requirement_is_a_commit_failure():
    meta, _ = _created()
    body = {
        "requirements": [{"type": "assert-ref-snapshot-id", "ref": "main", "snapshot-id": 42}],
        "updates": [],
    }
    with pytest.raises(CommitFailedException):
        apply_commit(meta, metadata_file_location(meta, 0), _commit(body))


def test_assert_create_fails_on_an_existing_table():
    meta, _ = _created()
    body = {"requirements": [{"type": "assert-create"}], "updates": []}
    with pytest.raises(CommitFailedException):
        apply_commit(meta, metadata_file_location(meta, 0), _commit(body))


def test_update_that_does_not_apply_is_a_value_error():
    meta, _ = _created()
    body = {"updates": [{"action": "set-current-schema", "schema-id": 99}]}
    with pytest.raises(ValueError, match="Schema with id 99"):
        apply_commit(meta, metadata_file_location(meta, 0), _commit(body))


async def test_write_metadata_writes_the_file_pyiceberg_reads(tmp_path):
    meta, _ = _created()
    target = tmp_path / "metadata" / "00000-x.metadata.json"
    target.parent.mkdir()
    await write_metadata(meta, f"file://{target}", {})
    assert parse_metadata(target.read_text()).table_uuid == meta.table_uuid


async def test_table_locks_serialize_one_table_and_are_released():
    locks = TableLocks()
    order: list[str] = []
    gate = asyncio.Event()

    async def first() -> None:
        async with locks.hold("t"):
            order.append("first-in")
            await gate.wait()
            order.append("first-out")

    async def second() -> None:
        async with locks.hold("t"):
            order.append("second-in")

    async def settle() -> None:
        for _ in range(50):  # bounded: let the tasks run as far as they can
            await asyncio.sleep(0)

    t1 = asyncio.create_task(first())
    await settle()
    t2 = asyncio.create_task(second())
    try:
        await settle()
        assert order == ["first-in"]
        assert len(locks) == 1
    finally:
        gate.set()
        await asyncio.wait_for(asyncio.gather(t1, t2), timeout=5)
    assert order == ["first-in", "first-out", "second-in"]
    assert len(locks) == 0


async def test_table_locks_do_not_block_other_tables():
    locks = TableLocks()
    async with locks.hold("a"):
        async with locks.hold("b", timeout_s=1.0):
            assert len(locks) == 2
    assert len(locks) == 0
