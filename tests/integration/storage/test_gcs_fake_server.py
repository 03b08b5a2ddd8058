"""GCS on fake-gcs-server behind the stack's token-checking layer: vended tokens in Lakekeeper's
shape, enforced (expiry, role, prefix, bucket); pyarrow, gcsfs and Lance write and read with
them, and deltalake is refused with its reason."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator

import httpx
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from devstack.bootstrap import fetch_token
from devstack.launcher import Stack
from lakegate_client import Client, StorageCredential, TableCredentials
from lakegate_client.engine.formats.lance_manifests import newest_version
from lakegate_client.engine.stores.base import S3Location
from lakegate_client.engine.stores.gcs import GcsStore
from lakegate_client.tables.directory import fs_path

pytestmark = pytest.mark.integration

ROWS = pa.table({"id": list(range(50)), "name": [f"row-{i}" for i in range(50)]})


@pytest.fixture
def client(cloud_stack: Stack) -> Iterator[Client]:
    with Client(f"unix:{cloud_stack.info.gateway.uds}", warehouse="demo_gcs") as c:
        yield c


@pytest.fixture
def table(client: Client, cloud_stack: Stack) -> str:
    name = f"gs_{uuid.uuid4().hex[:8]}"
    client.create(cloud_stack.info.namespace, name, format="parquet")
    return name


def _creds(client: Client, stack: Stack, name: str, access: str) -> TableCredentials:
    creds = client.credentials(stack.info.namespace, name, access=access)  # type: ignore[arg-type]
    assert stack.info.gcs is not None
    return creds.with_storage_endpoint(stack.info.gcs.endpoint)


def _object_url(stack: Stack, creds: TableCredentials, leaf: str = "") -> str:
    assert stack.info.gcs is not None
    bucket, _, key = fs_path(creds.location).partition("/")
    name = f"{key}/{leaf}" if leaf else key
    return f"{stack.info.gcs.endpoint}/storage/v1/b/{bucket}/o/{name.replace('/', '%2F')}"


def _upload(stack: Stack, creds: TableCredentials, leaf: str, token: str | None) -> int:
    assert stack.info.gcs is not None
    bucket, _, key = fs_path(creds.location).partition("/")
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    return httpx.post(
        f"{stack.info.gcs.endpoint}/upload/storage/v1/b/{bucket}/o",
        params={"uploadType": "media", "name": f"{key}/{leaf}"}, content=b"x",
        headers=headers, trust_env=False, timeout=10,
    ).status_code  # fmt: skip


def _token(creds: TableCredentials) -> str:
    return creds.config["gcs.oauth2.token"]


def test_vended_token_has_lakekeepers_keys_and_no_endpoint(client, cloud_stack, table):
    creds = client.credentials(cloud_stack.info.namespace, table, access="read")
    assert creds.storage == "gcs"
    assert creds.location.startswith("gs://warehouse/lakehouse/")
    assert set(creds.config) >= {
        "gcs.oauth2.token", "gcs.oauth2.token-expires-at", "expiration-time", "gcs.project-id",
    }  # fmt: skip
    assert not any("endpoint" in k or "service.host" in k for k in creds.config)
    assert creds.remaining_s is not None
    assert 3000 < creds.remaining_s <= 3600


def test_the_layer_enforces_token_role_prefix_and_bucket(client, cloud_stack, table):
    writer = _creds(client, cloud_stack, table, "write")
    reader = _creds(client, cloud_stack, table, "read")
    assert _upload(cloud_stack, writer, "f", _token(writer)) == 200
    get = f"{_object_url(cloud_stack, reader, 'f')}?alt=media"
    auth = {"Authorization": f"Bearer {_token(reader)}"}
    assert httpx.get(get, headers=auth, trust_env=False).status_code == 200
    assert httpx.get(get, trust_env=False).status_code == 401  # no token
    forged = {"Authorization": "Bearer ya29.lkg.e30.AAAA"}
    assert httpx.get(get, headers=forged, trust_env=False).status_code == 401
    assert _upload(cloud_stack, reader, "g", _token(reader)) == 403  # read role: no writes
    delete = _object_url(cloud_stack, reader, "f")
    assert httpx.delete(delete, headers=auth, trust_env=False).status_code == 403
    # Another table's prefix, and another bucket, are outside every token of this table.
    other = f"gs_{uuid.uuid4().hex[:8]}"
    client.create(cloud_stack.info.namespace, other, format="parquet")
    theirs = _creds(client, cloud_stack, other, "write")
    assert _upload(cloud_stack, theirs, "f", _token(writer)) == 403
    foreign = _object_url(cloud_stack, theirs, "f").replace("/b/warehouse/", "/b/elsewhere/")
    assert httpx.get(foreign, headers=auth, trust_env=False).status_code == 403
    wide = _object_url(cloud_stack, reader).rsplit("/o/", 1)[0] + "/o"
    listing = httpx.get(wide, params={"prefix": "lakehouse/"}, headers=auth, trust_env=False)
    assert listing.status_code == 403


def test_an_expired_token_is_refused(client, cloud_stack, hooks, table):
    """A token of 5 s straight from the catalog (the gateway would not serve one that short
    past its floor): accepted, then refused once expired."""
    info = cloud_stack.info
    direct = info.idp.clients["direct"]
    bearer = fetch_token(info.idp.token_url, direct.id, direct.secret)
    hooks.set_faults(credential_lifetime_s=5)
    wh = info.warehouse_for("gcs").id
    resp = httpx.get(
        f"{info.catalog.url}/lakekeeper/v1/{wh}/namespaces/{info.namespace}/generic-tables/"
        f"{table}/credentials",
        headers={"Authorization": f"Bearer {bearer}"}, trust_env=False, timeout=10,
    )  # fmt: skip
    assert resp.status_code == 200, resp.text
    [raw] = resp.json()["storage-credentials"]
    creds = TableCredentials.from_parts(
        location=raw["prefix"], credentials=[StorageCredential(raw["prefix"], raw["config"])]
    )
    assert creds.remaining_s is not None
    assert creds.remaining_s <= 5
    assert _upload(cloud_stack, creds, "early", _token(creds)) == 200
    time.sleep(max(0.0, creds.remaining_s) + 0.5)
    assert _upload(cloud_stack, creds, "late", _token(creds)) == 401


def test_pyarrow_and_gcsfs_write_and_read(client, cloud_stack, table):
    import gcsfs.core

    creds = _creds(client, cloud_stack, table, "write")
    root = fs_path(creds.location)
    pq.write_table(ROWS, f"{root}/part-0.parquet", filesystem=creds.pyarrow_filesystem())
    reader = _creds(client, cloud_stack, table, "read")
    assert pq.read_table(f"{root}/part-0.parquet", filesystem=reader.pyarrow_filesystem()).equals(
        ROWS
    )
    with pytest.raises(PermissionError):
        pq.write_table(ROWS, f"{root}/part-1.parquet", filesystem=reader.pyarrow_filesystem())
    # gcsfs's plain filesystem: the extended one (the default import) first asks Google's
    # storage-control API over gRPC/TLS, which no local store serves (a 60 s timeout).
    fs = gcsfs.core.GCSFileSystem(**creds.fsspec_kwargs(), skip_instance_cache=True)
    fs.pipe(f"{root}/g/part-2.parquet", pq_bytes(ROWS))
    assert fs.ls(f"{root}/g") == [f"{root}/g/part-2.parquet"]
    read_fs = gcsfs.core.GCSFileSystem(**reader.fsspec_kwargs(), skip_instance_cache=True)
    with read_fs.open(f"{root}/g/part-2.parquet", "rb") as handle:
        assert pq.read_table(handle).equals(ROWS)


@pytest.mark.slow
def test_gateway_refreshes_a_short_token_before_the_layer_refuses_it(
    client, cloud_stack, hooks, table
):
    """Tokens of 10 s: for 16 s every token the gateway serves is accepted; it moved to new
    ones ahead of expiry, and the oldest is refused once expired."""
    hooks.set_faults(credential_lifetime_s=10)
    writer = _creds(client, cloud_stack, table, "write")
    assert _upload(cloud_stack, writer, "data", _token(writer)) == 200
    seen: dict[int, TableCredentials] = {}
    deadline = time.monotonic() + 16
    while time.monotonic() < deadline:
        creds = _creds(client, cloud_stack, table, "read")
        assert creds.expires_at_ms is not None
        assert creds.remaining_s is not None
        assert creds.remaining_s > 1  # the serve floor is 2 s, measured after the round trip
        url = f"{_object_url(cloud_stack, creds, 'data')}?alt=media"
        auth = {"Authorization": f"Bearer {_token(creds)}"}
        assert httpx.get(url, headers=auth, trust_env=False).status_code == 200
        seen.setdefault(creds.expires_at_ms, creds)
        time.sleep(0.5)
    assert len(seen) >= 2, sorted(seen)
    oldest = seen[min(seen)]
    assert oldest.remaining_s is not None
    assert oldest.remaining_s < 0
    url = f"{_object_url(cloud_stack, oldest, 'data')}?alt=media"
    auth = {"Authorization": f"Bearer {_token(oldest)}"}
    assert httpx.get(url, headers=auth, trust_env=False).status_code == 401


def test_pyiceberg_reads_with_the_vended_gcs_keys(client, cloud_stack, table):
    """PyArrowFileIO maps `gcs.oauth2.token` and `gcs.oauth2.token-expires-at`; the local
    endpoint is `gcs.service.host` (a client setting)."""
    from pyiceberg.io.pyarrow import PyArrowFileIO

    writer = _creds(client, cloud_stack, table, "write")
    root = fs_path(writer.location)
    pq.write_table(ROWS, f"{root}/ice.parquet", filesystem=writer.pyarrow_filesystem())
    reader = client.credentials(cloud_stack.info.namespace, table, access="read")
    assert cloud_stack.info.gcs is not None
    io = PyArrowFileIO(
        properties={**reader.config, "gcs.service.host": cloud_stack.info.gcs.endpoint}
    )
    with io.new_input(f"{reader.location}/ice.parquet").open() as handle:
        assert pq.read_table(handle).equals(ROWS)


def test_gcsfs_uses_a_token_with_less_than_300_s_left(client, cloud_stack, hooks, table):
    """The tokeninfo defect, on a real store: a raw string made gcsfs ask Google and refuse a
    token with <= 300 s left; the credentials object works to the token's end."""
    import gcsfs.core

    hooks.set_faults(credential_lifetime_s=120)
    creds = _creds(client, cloud_stack, table, "write")
    assert creds.remaining_s is not None
    assert creds.remaining_s < 300
    fs = gcsfs.core.GCSFileSystem(**creds.fsspec_kwargs(), skip_instance_cache=True)
    root = fs_path(creds.location)
    fs.pipe(f"{root}/short.bin", b"still valid")
    assert fs.cat(f"{root}/short.bin") == b"still valid"


def test_lance_writes_and_reads_with_the_vended_token(client, cloud_stack, table):
    """Lance's object_store speaks GCS's XML API (simple and multipart uploads, conditional
    creates, lists), served by the layer on fake-gcs-server; the token is the vended one."""
    import lance
    import numpy as np

    writer = _creds(client, cloud_stack, table, "write")
    uri = f"{writer.location}/lance"
    rows = 800_000  # 12.8 MB of data file: a multipart upload
    big = pa.table({"id": np.arange(rows), "v": np.arange(rows) * 0.5})
    lance.write_dataset(big, uri, storage_options=writer.lance_storage_options())
    small = pa.table({"id": np.arange(50), "v": np.zeros(50)})
    lance.write_dataset(small, uri, mode="append", storage_options=writer.lance_storage_options())
    reader = _creds(client, cloud_stack, table, "read")
    got = lance.dataset(uri, storage_options=reader.lance_storage_options())
    assert got.count_rows() == 800_050
    assert got.version == 2
    # a write's planning reads the version from one page of the listing (maxResults)
    assert newest_version(GcsStore.for_credentials(writer), S3Location.parse(uri)) == 2
    assert sorted(got.to_table(columns=["id"], filter="id < 3")["id"].to_pylist()) == [
        0, 0, 1, 1, 2, 2,
    ]  # fmt: skip
    with pytest.raises(OSError, match=r"403"):
        lance.write_dataset(ROWS, f"{reader.location}/lance-denied",
                            storage_options=reader.lance_storage_options())  # fmt: skip
    with pytest.raises(OSError, match=r"(?i)already exists"):
        lance.write_dataset(big, uri, mode="create", storage_options=writer.lance_storage_options())
    assert lance.dataset(uri, storage_options=reader.lance_storage_options()).version == 2


def test_deltalake_is_refused_with_its_reason(client, cloud_stack, table):
    from lakegate_client import UnsupportedStorageError

    creds = _creds(client, cloud_stack, table, "write")
    with pytest.raises(UnsupportedStorageError, match=r"object_store 0\.13"):
        creds.delta_storage_options()


def pq_bytes(table: pa.Table) -> bytes:
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink)
    return sink.getvalue().to_pybytes()


class _Died(BaseException):
    """The simulated driver died here."""


def test_the_next_read_finishes_a_gcs_commit_whose_driver_died(client, cloud_stack, table,
                                                                monkeypatch):
    """The plain protocol on GCS, on the real stand-in: a driver dies after publishing the first
    of two staged files (past the point of no return); the next ``read_table`` rolls it forward
    with a fresh write token, and no intent or staged part is left."""
    from lakegate_client.engine.formats.plain import CommitTiming, commit_plain, plan_plain
    from lakegate_client.engine.staged import stage_parquet
    from lakegate_client.engine.stores.base import PendingUpload
    from lakegate_client.engine.stores.gcs import STAGING_DIR
    from lakegate_client.tables import read_table, write_table

    ns = cloud_stack.info.namespace
    assert cloud_stack.info.gcs is not None
    endpoint = cloud_stack.info.gcs.endpoint
    monkeypatch.setenv("LAKEGATE_GCS_ENDPOINT", endpoint)  # the client setting read_table uses
    write_table(client, ns, table, pa.table({"id": list(range(10))}), format="parquet")
    store = GcsStore.for_credentials(_creds(client, cloud_stack, table, "write"))
    where = S3Location.parse(_creds(client, cloud_stack, table, "write").location)
    plan = plan_plain(store, where, "parquet")
    schema = pa.schema([("id", pa.int64())])
    wid = uuid.uuid4().hex
    uploads = [
        stage_parquet(store, where.bucket, where.key(f"part-{wid}-{i:05d}-x.parquet"), schema,
                      [pa.record_batch([pa.array(range(100 + 10 * i, 110 + 10 * i))],
                                       schema=schema)])
        for i in range(2)
    ]  # fmt: skip

    class DiesAtSecondCompletion(GcsStore):
        completions = 0

        def complete_staged(self, upload: PendingUpload) -> None:
            DiesAtSecondCompletion.completions += 1
            if DiesAtSecondCompletion.completions >= 2:
                raise _Died(upload.key)
            super().complete_staged(upload)

    dying = DiesAtSecondCompletion(endpoint, where.bucket, _token(
        _creds(client, cloud_stack, table, "write")))  # fmt: skip
    an_hour_ago = CommitTiming(now=lambda: time.time() - 3600)
    with pytest.raises(_Died):
        commit_plain(dying, where, "parquet", plan, uploads, overwrite=True, write_id=wid,
                     timing=an_hour_ago)  # fmt: skip
    keys = store.list(where.prefix + "/")
    assert sum(k.endswith(".parquet") for k in keys) == 2  # torn: the old file and one new
    assert any("_lakegate_intent-" in k for k in keys)
    assert any(f"/{STAGING_DIR}/" in k for k in keys)  # the second file is still staged

    got = read_table(client, ns, table).column("id").to_pylist()

    assert sorted(got) == list(range(100, 120))
    keys = store.list(where.prefix + "/")
    assert not [k for k in keys if "_lakegate_intent-" in k or f"/{STAGING_DIR}/" in k]
