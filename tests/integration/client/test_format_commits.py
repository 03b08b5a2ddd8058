"""Delta and Lance commits whose answer is lost, on the real stack (issue 32, finding 5): the
log or version the store kept names the write, so the driver reports success and keeps the
files the table references (``lakegate_client/engine/``)."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from typing import Any

import pyarrow as pa
import pytest

from lakegate_client import Client
from lakegate_client.engine.formats import delta as delta_format
from lakegate_client.engine.formats import lance as lance_format
from lakegate_client.engine.staged import stage_parquet
from lakegate_client.engine.stores import s3 as s3_store
from lakegate_client.engine.stores.base import S3Location
from lakegate_client.spark.writer import WrittenFile
from lakegate_client.tables import read_table, write_table
from lakegate_client.tables.directory import new_data_file

pytestmark = pytest.mark.integration
SCHEMA = pa.schema([("id", pa.int64())])


@pytest.fixture
def table(devstack: Any) -> Iterator[tuple[Client, str, str]]:
    info = devstack.info
    name = f"lost_{uuid.uuid4().hex[:8]}"
    with Client(info.gateway_url, warehouse=info.warehouse.name) as c:
        yield c, info.namespace, name
        c.drop(info.namespace, name, purge=True)


def _ids(c: Client, ns: str, name: str) -> list[int]:
    return sorted(read_table(c, ns, name).column("id").to_pylist())


def test_a_delta_commit_whose_answer_is_lost_is_found_in_the_log(
    table: tuple[Client, str, str], monkeypatch: pytest.MonkeyPatch,
) -> None:
    c, ns, name = table
    write_table(c, ns, name, pa.table({"id": [1, 2]}, schema=SCHEMA), format="delta",
                create=True)
    creds = c.credentials([ns], name, access="write")
    s3, where = s3_store.s3_client(creds), S3Location.parse(creds.location)
    write_id = uuid.uuid4().hex
    rel = new_data_file(write_id, 0, "parquet")
    upload = stage_parquet(s3, where.bucket, where.key(rel), SCHEMA,
                           pa.table({"id": [3]}, schema=SCHEMA).to_batches())
    real = delta_format.delta_commit

    def commit_then_lose(*args: Any, **kwargs: Any) -> None:
        real(*args, **kwargs)
        raise OSError("the answer timed out")

    monkeypatch.setattr(delta_format, "delta_commit", commit_then_lose)
    delta_format.publish_delta(creds, SCHEMA, [WrittenFile(rel, upload.size, 1, 0)], [upload],
                               overwrite=False, write_id=write_id)
    monkeypatch.undo()
    assert _ids(c, ns, name) == [1, 2, 3]
    assert delta_format.delta_committed(creds, write_id) is True


def test_a_lance_commit_whose_answer_is_lost_is_found_in_the_versions(
    table: tuple[Client, str, str], monkeypatch: pytest.MonkeyPatch,
) -> None:
    import lance
    from lance.fragment import write_fragments

    c, ns, name = table
    write_table(c, ns, name, pa.table({"id": [1, 2]}, schema=SCHEMA), format="lance",
                create=True)
    creds = c.credentials([ns], name, access="write")
    version = lance_format.lance_version(creds)
    fragments = [json.dumps(f.to_json()) for f in write_fragments(
        pa.table({"id": [3]}, schema=SCHEMA), creds.location, schema=SCHEMA,
        storage_options=creds.lance_storage_options())]
    real, lost = lance.LanceDataset.commit, []

    def commit_then_lose(*args: Any, **kwargs: Any) -> Any:
        real(*args, **kwargs)
        lost.append(True)
        raise OSError("503 Slow Down")

    monkeypatch.setattr(lance.LanceDataset, "commit", staticmethod(commit_then_lose))
    lance_format.commit_lance(creds, SCHEMA, fragments, overwrite=False, read_version=version,
                              write_id=uuid.uuid4().hex)
    monkeypatch.undo()
    assert lost == [True]
    assert _ids(c, ns, name) == [1, 2, 3]
