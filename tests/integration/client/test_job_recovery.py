"""A Lance or Delta Spark job whose driver died before its commit loses its files to the next
read (issue 32 item 6, ``engine/job_intent.py``): real stack, SeaweedFS, vended credentials,
the client's ``read_table``."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pyarrow as pa
import pytest

from lakegate_client import Client
from lakegate_client.engine import attempts
from lakegate_client.engine.formats import delta as delta_format
from lakegate_client.engine.formats import lance as lance_format
from lakegate_client.engine.job_intent import JOB_PREFIX, JobIntent, JobTiming
from lakegate_client.engine.staged import complete_uploads, stage_parquet
from lakegate_client.engine.stores import s3 as s3_store
from lakegate_client.engine.stores.base import S3Location
from lakegate_client.tables import read_table, write_table
from lakegate_client.tables.directory import new_data_file

pytestmark = pytest.mark.integration
SCHEMA = pa.schema([("id", pa.int64())])
AN_HOUR_AGO = JobTiming(now=lambda: time.time() - 3_600)  # the dead driver's last renewal


@pytest.fixture
def table(devstack: Any) -> Iterator[tuple[Client, str, str]]:
    info = devstack.info
    name = f"orphan_{uuid.uuid4().hex[:8]}"
    with Client(info.gateway_url, warehouse=info.warehouse.name) as c:
        yield c, info.namespace, name
        c.drop(info.namespace, name, purge=True)


def _keys(s3: Any, where: S3Location) -> list[str]:
    page = s3.list_objects_v2(Bucket=where.bucket, Prefix=f"{where.prefix}/")
    return [where.relative(str(o["Key"])) for o in page.get("Contents", ())]


def test_the_next_read_removes_the_fragments_of_a_lance_job_killed_before_its_commit(
    table: tuple[Client, str, str],
) -> None:
    from lance.fragment import write_fragments

    c, ns, name = table
    write_table(c, ns, name, pa.table({"id": [1, 2]}, schema=SCHEMA), format="lance",
                create=True)
    creds = c.credentials([ns], name, access="write")
    s3, where = s3_store.s3_client(creds), S3Location.parse(creds.location)
    write_id = uuid.uuid4().hex
    JobIntent(s3, where, write_id, AN_HOUR_AGO).create(  # planning, by a driver now dead
        "lance", staged=False, read_version=lance_format.lance_version(creds))
    fragments = [json.dumps(f.to_json()) for f in write_fragments(
        pa.table({"id": [3, 4]}, schema=SCHEMA), creds.location, schema=SCHEMA,
        storage_options=creds.lance_storage_options())]
    files = lance_format.lance_files(fragments)
    attempts.check_in(s3, where, write_id, 0, 0, files)  # the task; the commit never comes
    assert set(files) <= set(_keys(s3, where))

    assert sorted(read_table(c, ns, name).column("id").to_pylist()) == [1, 2]

    left = _keys(s3, where)
    assert not set(files) & set(left)
    assert not [k for k in left if k.startswith(JOB_PREFIX)]
    assert sorted(read_table(c, ns, name).column("id").to_pylist()) == [1, 2]


def test_the_next_read_removes_the_files_of_a_delta_job_killed_before_its_log_commit(
    table: tuple[Client, str, str],
) -> None:
    """The driver fenced its intent and completed its uploads (visible, unreferenced files),
    then died before the Delta commit call."""
    c, ns, name = table
    write_table(c, ns, name, pa.table({"id": [1, 2]}, schema=SCHEMA), format="delta",
                create=True)
    creds = c.credentials([ns], name, access="write")
    s3, where = s3_store.s3_client(creds), S3Location.parse(creds.location)
    write_id = uuid.uuid4().hex
    intent = JobIntent(s3, where, write_id, AN_HOUR_AGO)
    intent.create("delta", staged=True)
    rel = new_data_file(write_id, 0, "parquet")
    upload = stage_parquet(s3, where.bucket, where.key(rel), SCHEMA,
                           pa.table({"id": [3]}, schema=SCHEMA).to_batches())
    intent.fence(uploads=[[upload.key, upload.upload_id]], files=[rel])
    complete_uploads(s3, where.bucket, [upload])
    assert rel in _keys(s3, where)

    assert sorted(read_table(c, ns, name).column("id").to_pylist()) == [1, 2]

    left = _keys(s3, where)
    assert rel not in left
    assert not [k for k in left if k.startswith(JOB_PREFIX)]
    assert delta_format.delta_committed(creds, write_id) is False
