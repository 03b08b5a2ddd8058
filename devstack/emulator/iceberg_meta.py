"""Iceberg metadata and commit semantics, delegated to pyiceberg (no hand-written metadata logic).

- Create: `pyiceberg.table.metadata.new_table_metadata` (fresh ids, table UUID, format version).
- Commit: every requirement's own `.validate(base)` (a stale one raises pyiceberg's
  `CommitFailedException`, rendered as Iceberg's 409), then
  `pyiceberg.table.update.update_table_metadata`, exactly as pyiceberg's metastore catalogs
  stage a commit; the next file name comes from pyiceberg's location provider
  (`<location>/metadata/NNNNN-<uuid>.metadata.json`).
- Write: pyiceberg's `ToOutputFile.table_metadata` through its `PyArrowFileIO`, with the vended
  read-write credential of the table (the catalog's static identity may only read), in a worker
  thread because the S3 client blocks.
- Commits of one table are serialized by `TableLocks`; the pointer swap in the store is a
  compare-and-set on top, so a lost race is a 409, never a lost update.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from pydantic import Field
from pyiceberg.catalog import MetastoreCatalog
from pyiceberg.io.pyarrow import PyArrowFileIO
from pyiceberg.partitioning import UNPARTITIONED_PARTITION_SPEC, PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.serializers import FromInputFile, ToOutputFile
from pyiceberg.table import TableIdentifier
from pyiceberg.table.locations import load_location_provider
from pyiceberg.table.metadata import TableMetadata, TableMetadataUtil, new_table_metadata
from pyiceberg.table.sorting import UNSORTED_SORT_ORDER, SortOrder
from pyiceberg.table.update import TableRequirement, TableUpdate, update_table_metadata

from devstack.emulator.wire import Body


class CreateIcebergTable(Body):
    """Iceberg `CreateTableRequest` (location, spec and order optional as in the REST spec)."""

    name: str
    location: str | None = None
    schema_: Schema = Field(alias="schema")
    partition_spec: PartitionSpec | None = Field(default=None, alias="partition-spec")
    write_order: SortOrder | None = Field(default=None, alias="write-order")
    stage_create: bool = Field(default=False, alias="stage-create")
    properties: dict[str, str] = Field(default_factory=dict)


class CommitIcebergTable(Body):
    """Iceberg `CommitTableRequest`; the identifier is optional on the table path."""

    identifier: TableIdentifier | None = None
    requirements: tuple[TableRequirement, ...] = ()
    updates: tuple[TableUpdate, ...] = ()


class RenameIcebergTable(Body):
    source: TableIdentifier
    destination: TableIdentifier


def create_metadata(req: CreateIcebergTable, location: str, table_id: str) -> TableMetadata:
    """New table metadata (pyiceberg assigns fresh ids; the table UUID is the catalog's id)."""
    return new_table_metadata(
        schema=req.schema_,
        partition_spec=req.partition_spec or UNPARTITIONED_PARTITION_SPEC,
        sort_order=req.write_order or UNSORTED_SORT_ORDER,
        location=location,
        properties=dict(req.properties),
        table_uuid=uuid.UUID(table_id),
    )


def metadata_file_location(metadata: TableMetadata, version: int) -> str:
    """`<location>/metadata/NNNNN-<uuid>.metadata.json`, from pyiceberg's location provider."""
    provider = load_location_provider(metadata.location, metadata.properties)
    return provider.new_table_metadata_file_location(version)


def apply_commit(
    base: TableMetadata | None,
    base_location: str | None,
    req: CommitIcebergTable,
) -> tuple[TableMetadata, str]:
    """Validate the requirements against `base`, apply the updates, name the next file.

    Raises pyiceberg's `CommitFailedException` for a failed requirement and `ValueError` for an
    update that does not apply (a bad request).
    """
    for requirement in req.requirements:
        requirement.validate(base)
    updated = update_table_metadata(
        base_metadata=base if base is not None else MetastoreCatalog._empty_table_metadata(),
        updates=req.updates,
        enforce_validation=base is None,
        metadata_location=base_location,
    )
    version = MetastoreCatalog._parse_metadata_version(base_location) + 1 if base_location else 0
    return updated, metadata_file_location(updated, version)


def parse_metadata(raw: str) -> TableMetadata:
    return TableMetadataUtil.parse_raw(raw)


def dump_metadata(metadata: TableMetadata) -> str:
    """The JSON pyiceberg writes to the metadata file (and the catalog keeps as its copy)."""
    return metadata.model_dump_json(exclude_none=True)


class RegisterIcebergTable(Body):
    """Iceberg `RegisterTableRequest`."""

    name: str
    metadata_location: str = Field(alias="metadata-location")
    overwrite: bool = False


def _read_blocking(location: str, io_props: dict[str, str]) -> TableMetadata:
    io = PyArrowFileIO(properties=io_props)
    return FromInputFile.table_metadata(io.new_input(location))


async def read_metadata(location: str, io_props: dict[str, str]) -> TableMetadata:
    """Read a metadata file from storage (worker thread; bounded like `write_metadata`)."""
    return await asyncio.wait_for(
        asyncio.to_thread(_read_blocking, location, io_props), timeout=60.0
    )


def _write_blocking(metadata: TableMetadata, location: str, io_props: dict[str, str]) -> None:
    io = PyArrowFileIO(properties=io_props)
    ToOutputFile.table_metadata(metadata, io.new_output(location))


async def write_metadata(metadata: TableMetadata, location: str, io_props: dict[str, str]) -> None:
    """Write the metadata file to storage (worker thread; bounded by the S3 client's timeouts)."""
    await asyncio.wait_for(
        asyncio.to_thread(_write_blocking, metadata, location, io_props), timeout=60.0
    )


class TableLocks:
    """One asyncio lock per table id, dropped when nobody holds or waits for it."""

    def __init__(self) -> None:
        self._locks: dict[str, tuple[asyncio.Lock, list[int]]] = {}

    @asynccontextmanager
    async def hold(self, table_id: str, timeout_s: float = 60.0) -> AsyncIterator[None]:
        entry = self._locks.get(table_id)
        if entry is None:
            entry = (asyncio.Lock(), [0])
            self._locks[table_id] = entry
        lock, users = entry
        users[0] += 1
        try:
            await asyncio.wait_for(lock.acquire(), timeout=timeout_s)
            try:
                yield
            finally:
                lock.release()
        finally:
            users[0] -= 1
            if users[0] == 0 and self._locks.get(table_id) is entry:
                del self._locks[table_id]

    def __len__(self) -> int:
        return len(self._locks)


def metadata_dict(metadata: TableMetadata) -> dict[str, Any]:
    """The metadata as a JSON object for a response body."""
    out: dict[str, Any] = json.loads(dump_metadata(metadata))
    return out
