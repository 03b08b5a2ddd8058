"""A Delta job on ADLS whose driver died before its log commit loses its files to the next read
(``engine/job_intent.py`` on the Blob API): real Azurite, vended SAS tokens, the client's
``read_table``. Before the intent ran on ADLS, those files stayed for good."""

from __future__ import annotations

import time
import uuid

import pyarrow as pa
import pytest

from devstack.launcher import Stack
from lakegate_client import Client, TableCredentials
from lakegate_client.engine import jobs, stores
from lakegate_client.engine.formats import delta as delta_format
from lakegate_client.engine.job_intent import JOB_PREFIX, JobTiming
from lakegate_client.engine.staged import complete_uploads, stage_parquet
from lakegate_client.engine.stores.base import S3Location
from lakegate_client.tables import read_table, write_table
from lakegate_client.tables.directory import new_data_file

pytestmark = pytest.mark.integration

SCHEMA = pa.schema([("id", pa.int64())])
AN_HOUR_AGO = JobTiming(now=lambda: time.time() - 3_600)  # the dead driver's last renewal


@pytest.fixture
def client(adls_client: Client) -> Client:
    return adls_client


def _creds(client: Client, stack: Stack, name: str) -> TableCredentials:
    creds = client.credentials(stack.info.namespace, name, access="write")
    assert stack.info.azure is not None
    return creds.with_storage_endpoint(stack.info.azure.blob_endpoint)


def test_the_next_read_removes_the_files_of_a_delta_job_killed_before_its_log_commit(
        client: Client, cloud_stack: Stack) -> None:
    """The driver wrote its intent at planning, fenced it and completed its staged blocks
    (visible, unreferenced Parquet), then died before the Delta commit call."""
    ns, name = cloud_stack.info.namespace, f"azj_{uuid.uuid4().hex[:8]}"
    write_table(client, ns, name, pa.table({"id": [1, 2]}, schema=SCHEMA), format="delta",
                create=True)
    creds = _creds(client, cloud_stack, name)
    store, where = stores.table_store(creds), S3Location.parse(creds.location)
    write_id = uuid.uuid4().hex
    intent = jobs.job_of(creds, write_id, AN_HOUR_AGO)  # planning, by a driver now dead
    assert intent is not None  # None: no job intent on ADLS
    intent.create("delta", staged=True)
    rel = new_data_file(write_id, 0, "parquet")
    upload = stage_parquet(store, where.bucket, where.key(rel), SCHEMA,
                           pa.table({"id": [3]}, schema=SCHEMA).to_batches())
    intent.fence(uploads=[[upload.key, upload.upload_id]], files=[rel])
    complete_uploads(store, where.bucket, [upload])
    assert store.head(where.key(rel)) is not None

    assert sorted(read_table(client, ns, name).column("id").to_pylist()) == [1, 2]

    left = [where.relative(k) for k in store.list(f"{where.prefix}/")]
    assert rel not in left
    assert not [k for k in left if k.startswith(JOB_PREFIX)]
    assert delta_format.delta_committed(creds, write_id) is False
    assert sorted(read_table(client, ns, name).column("id").to_pylist()) == [1, 2]
