"""A Lance job on GCS whose driver died before its commit loses its fragment files to the next
read (``engine/job_intent.py`` on generation preconditions): fake-gcs-server behind the stack's
token-checking layer, vended OAuth tokens, the client's ``read_table``. Before the intent ran on
GCS, those files stayed until Lance's own cleanup."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator

import pyarrow as pa
import pytest

from devstack.launcher import Stack
from lakegate_client import Client
from lakegate_client.engine import attempts, jobs, stores
from lakegate_client.engine.formats import lance as lance_format
from lakegate_client.engine.job_intent import JOB_PREFIX, JobTiming
from lakegate_client.engine.stores.base import S3Location
from lakegate_client.tables import read_table, write_table

pytestmark = pytest.mark.integration

SCHEMA = pa.schema([("id", pa.int64())])
AN_HOUR_AGO = JobTiming(now=lambda: time.time() - 3_600)  # the dead driver's last renewal


@pytest.fixture
def client(cloud_stack: Stack, monkeypatch: pytest.MonkeyPatch) -> Iterator[Client]:
    assert cloud_stack.info.gcs is not None  # read_table reaches the store through the env
    monkeypatch.setenv("LAKEGATE_GCS_ENDPOINT", cloud_stack.info.gcs.endpoint)
    with Client(f"unix:{cloud_stack.info.gateway.uds}", warehouse="demo_gcs") as c:
        yield c


def test_the_next_read_removes_the_fragments_of_a_lance_job_killed_before_its_commit(
        client: Client, cloud_stack: Stack) -> None:
    from lance.fragment import write_fragments

    ns, name = cloud_stack.info.namespace, f"gsj_{uuid.uuid4().hex[:8]}"
    write_table(client, ns, name, pa.table({"id": [1, 2]}, schema=SCHEMA), format="lance",
                create=True)
    assert cloud_stack.info.gcs is not None
    creds = client.credentials(ns, name, access="write").with_storage_endpoint(
        cloud_stack.info.gcs.endpoint)
    store, where = stores.table_store(creds), S3Location.parse(creds.location)
    write_id = uuid.uuid4().hex
    intent = jobs.job_of(creds, write_id, AN_HOUR_AGO)  # planning, by a driver now dead
    assert intent is not None  # None: no job intent on GCS
    intent.create("lance", staged=False, read_version=lance_format.lance_version(creds))
    fragments = [json.dumps(f.to_json()) for f in write_fragments(
        pa.table({"id": [3, 4]}, schema=SCHEMA), creds.location, schema=SCHEMA,
        storage_options=creds.lance_storage_options())]
    files = lance_format.lance_files(fragments)
    attempts.check_in(store, where, write_id, 0, 0, files)  # the task; the commit never comes
    assert all(store.head(where.key(f)) is not None for f in files)

    assert sorted(read_table(client, ns, name).column("id").to_pylist()) == [1, 2]

    assert all(store.head(where.key(f)) is None for f in files)
    assert [k for k in store.list(f"{where.prefix}/") if JOB_PREFIX in k] == []
    assert sorted(read_table(client, ns, name).column("id").to_pylist()) == [1, 2]
