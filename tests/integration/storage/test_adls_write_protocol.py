"""The plain-table write protocol on Azurite with vended SAS tokens (issue 34): the store passes
the conditional-writes probe, a staged file is uncommitted blocks nobody can see until the
commit's Put Block List, two overwrites planned against one table give one winner and a loud
conflict, and a reader finishes a commit whose driver died. Also pins what Azure gives for
giving up a staged file: nothing (the README's debris note)."""

from __future__ import annotations

import time
import uuid

import httpx
import pyarrow as pa
import pytest

from devstack.launcher import Stack
from lakegate_client import Client, TableCredentials
from lakegate_client.engine.conditional_writes import ConditionalWriteProbe
from lakegate_client.engine.formats.plain import (
    CommitTiming,
    WriteConflictError,
    abort_plain,
    commit_plain,
    plan_plain,
)
from lakegate_client.engine.staged import stage_parquet
from lakegate_client.engine.stores.adls import AzureBlobStore
from lakegate_client.engine.stores.base import PendingUpload, S3Location
from lakegate_client.tables import read_table

pytestmark = pytest.mark.integration

SCHEMA = pa.schema([("id", pa.int64())])


class Died(BaseException):
    """The driver stops right after its point of no return."""


@pytest.fixture
def client(adls_client: Client) -> Client:
    return adls_client


@pytest.fixture
def table(client: Client, cloud_stack: Stack) -> str:
    name = f"azw_{uuid.uuid4().hex[:8]}"
    client.create(cloud_stack.info.namespace, name, format="parquet")
    return name


def _creds(client: Client, stack: Stack, name: str, access: str = "write") -> TableCredentials:
    creds = client.credentials(stack.info.namespace, name, access=access)  # type: ignore[arg-type]
    assert stack.info.azure is not None
    return creds.with_storage_endpoint(stack.info.azure.blob_endpoint)


def _stage(store: AzureBlobStore, where: S3Location, write_id: str, ids: list[int]
           ) -> PendingUpload:
    rel = f"part-{write_id}-{ids[0]:05d}-{uuid.uuid4().hex[:6]}.parquet"
    batch = pa.record_batch([pa.array(ids, pa.int64())], schema=SCHEMA)
    return stage_parquet(store, where.bucket, where.key(rel), SCHEMA, [batch])


def _data(store: AzureBlobStore, where: S3Location) -> list[str]:
    return sorted(where.relative(k) for k in store.list(f"{where.prefix}/")
                  if k.endswith(".parquet"))


def test_azurite_passes_the_conditional_writes_probe_with_a_vended_sas(client, cloud_stack,
                                                                        table):
    creds = _creds(client, cloud_stack, table)
    store, where = AzureBlobStore.for_credentials(creds), S3Location.parse(creds.location)
    probe = ConditionalWriteProbe()
    probe.ensure(store, where.bucket, where.prefix)  # raises UnsafeStoreError otherwise
    assert ConditionalWriteProbe._probe(store, where.prefix) is None
    assert store.list(f"{where.prefix}/") == {}  # the probe objects are gone


def test_a_staged_file_is_invisible_until_its_put_block_list(client, cloud_stack, table):
    creds = _creds(client, cloud_stack, table)
    store, where = AzureBlobStore.for_credentials(creds), S3Location.parse(creds.location)
    upload = _stage(store, where, "w1", list(range(5)))
    reader = _creds(client, cloud_stack, table, "read")
    assert store.head(upload.key) is None
    assert _data(store, where) == []
    assert read_table(client, cloud_stack.info.namespace, table).num_rows == 0
    assert list(store.pending_staged(f"{where.prefix}/")) == [(upload.key, upload.upload_id)]
    store.complete_staged(upload)
    store.complete_staged(upload)  # a recoverer's second completion is "done", not a rewrite
    assert read_table(client, cloud_stack.info.namespace, table).column("id").to_pylist() == [
        0, 1, 2, 3, 4]
    assert AzureBlobStore.for_credentials(reader).head(upload.key) is not None


def test_two_overwrites_planned_against_one_table_give_one_winner_and_a_conflict(
        client, cloud_stack, table):
    creds = _creds(client, cloud_stack, table)
    store, where = AzureBlobStore.for_credentials(creds), S3Location.parse(creds.location)
    commit_plain(store, where, "parquet", plan_plain(store, where, "parquet"),
                 [_stage(store, where, "w0", [1, 2])], overwrite=False, write_id="w0")
    plan_a, plan_b = plan_plain(store, where, "parquet"), plan_plain(store, where, "parquet")
    mine_a, mine_b = [_stage(store, where, "wa", [10, 11])], [_stage(store, where, "wb", [20])]
    commit_plain(store, where, "parquet", plan_a, mine_a, overwrite=True, write_id="wa")
    with pytest.raises(WriteConflictError):
        commit_plain(store, where, "parquet", plan_b, mine_b, overwrite=True, write_id="wb")
    assert abort_plain(store, where, mine_b, "wb")
    rows = read_table(client, cloud_stack.info.namespace, table).column("id").to_pylist()
    assert sorted(rows) == [10, 11]
    assert [rel for rel in store.list(f"{where.prefix}/") if "_lakegate_intent-" in rel] == []


def test_a_reader_finishes_a_commit_whose_driver_died_after_its_point_of_no_return(
        client, cloud_stack, table):
    creds = _creds(client, cloud_stack, table)
    store, where = AzureBlobStore.for_credentials(creds), S3Location.parse(creds.location)
    commit_plain(store, where, "parquet", plan_plain(store, where, "parquet"),
                 [_stage(store, where, "w0", [1, 2])], overwrite=False, write_id="w0")
    plan = plan_plain(store, where, "parquet")
    ups = [_stage(store, where, "w1", [10]), _stage(store, where, "w1", [11])]

    def die(step: str) -> None:
        raise Died(step)

    with pytest.raises(Died):
        commit_plain(store, where, "parquet", plan, ups, overwrite=True, write_id="w1",
                     timing=CommitTiming(lease_s=1.0, on_step=die))
    torn = _data(store, where)
    assert len([r for r in torn if "-w1-" in r]) == 1
    assert any("-w0-" in r for r in torn)
    time.sleep(1.5)  # the dead driver's lease runs out
    rows = read_table(client, cloud_stack.info.namespace, table).column("id").to_pylist()
    assert sorted(rows) == [10, 11]  # rolled forward by the read, never read torn
    assert all("-w1-" in r for r in _data(store, where))


def test_abandoning_a_staged_file_never_touches_a_published_one(client, cloud_stack, table):
    """Delete Blob of a blob with only uncommitted blocks: Azurite answers 202 and drops it
    from listings (what ``abandon_staged`` relies on, behind a HEAD: Azurite deletes a
    committed blob despite ``If-None-Match: *``)."""
    creds = _creds(client, cloud_stack, table)
    store, where = AzureBlobStore.for_credentials(creds), S3Location.parse(creds.location)
    given_up, published = _stage(store, where, "w1", [1]), _stage(store, where, "w1", [2])
    store.complete_staged(published)
    assert store.abandon_staged(given_up.key, given_up.upload_id) is True
    assert store.abandon_staged(published.key, published.upload_id) is False
    assert list(store.pending_staged(f"{where.prefix}/")) == []
    assert _data(store, where) == [where.relative(published.key)]
    sas = creds.adls().sas_token
    url = f"{creds.adls().blob_endpoint}/{where.bucket}/{published.key}?{sas}"
    answer = httpx.delete(url, headers={"x-ms-version": "2021-08-06", "If-None-Match": "*"},
                          trust_env=False, timeout=10)
    assert answer.status_code == 202  # Azurite ignores the condition: hence abandon's HEAD
