"""ADLS for real on Azurite: vended SAS tokens are enforced by the store (expiry, permissions,
container), the gateway refreshes them before the store refuses, and every consumer the client
serves reads and writes with them."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from devstack import azurite
from devstack.bootstrap import adls_warehouse, create_warehouse, fetch_token
from devstack.launcher import Stack
from lakegate_client import Client, TableCredentials
from lakegate_client.duckdb.extensions import connect
from lakegate_client.duckdb.sql import duckdb_location, scan_expression, table_secret_sql
from lakegate_client.engine.formats.lance_manifests import newest_version
from lakegate_client.engine.stores.adls import AzureBlobStore
from lakegate_client.engine.stores.base import S3Location
from lakegate_client.tables.directory import fs_path

pytestmark = pytest.mark.integration

ROWS = pa.table({"id": list(range(50)), "name": [f"row-{i}" for i in range(50)]})
SAS_KEY = "adls.sas-token.devstoreaccount1.dfs.core.windows.net"


@pytest.fixture
def client(cloud_stack: Stack) -> Iterator[Client]:
    info = cloud_stack.info
    with Client(f"unix:{info.gateway.uds}", warehouse="demo_adls") as c:
        yield c


@pytest.fixture
def table(client: Client, cloud_stack: Stack) -> str:
    name = f"az_{uuid.uuid4().hex[:8]}"
    client.create(cloud_stack.info.namespace, name, format="parquet")
    return name


def _creds(client: Client, stack: Stack, name: str, access: str) -> TableCredentials:
    creds = client.credentials(stack.info.namespace, name, access=access)  # type: ignore[arg-type]
    assert stack.info.azure is not None
    return creds.with_storage_endpoint(stack.info.azure.blob_endpoint)


def _blob_url(stack: Stack, creds: TableCredentials, leaf: str) -> str:
    """`<endpoint>/<container>/<key>/<leaf>?<sas>` of a credential (httpx, no SDK)."""
    assert stack.info.azure is not None
    sas = creds.config[SAS_KEY]
    return f"{stack.info.azure.blob_endpoint}/{fs_path(creds.location)}/{leaf}?{sas}"


def _put(url: str) -> int:
    return httpx.put(
        url, content=b"x", headers={"x-ms-blob-type": "BlockBlob"}, trust_env=False, timeout=10
    ).status_code


def _get(url: str) -> int:
    return httpx.get(url, trust_env=False, timeout=10).status_code


def test_vended_sas_has_lakekeepers_keys_and_no_endpoint(client, cloud_stack, table):
    creds = client.credentials(cloud_stack.info.namespace, table, access="read")
    assert creds.storage == "adls"
    assert creds.location.startswith("abfss://warehouse@devstoreaccount1.dfs.core.windows.net/")
    assert set(creds.config) >= {
        SAS_KEY,
        "adls.sas-token-expires-at-ms.devstoreaccount1.dfs.core.windows.net",
        "expiration-time",
    }
    assert not any("endpoint" in k for k in creds.config)
    assert creds.remaining_s is not None
    assert 3000 < creds.remaining_s <= 3600


def test_read_credential_reads_but_cannot_write_or_delete(client, cloud_stack, table):
    writer = _creds(client, cloud_stack, table, "write")
    reader = _creds(client, cloud_stack, table, "read")
    assert _put(_blob_url(cloud_stack, writer, "f")) == 201
    assert _get(_blob_url(cloud_stack, reader, "f")) == 200
    assert _put(_blob_url(cloud_stack, reader, "g")) == 403
    assert httpx.delete(_blob_url(cloud_stack, reader, "f"), trust_env=False).status_code == 403
    assert _get(_blob_url(cloud_stack, reader, "f")) == 200  # still there
    assert httpx.delete(_blob_url(cloud_stack, writer, "f"), trust_env=False).status_code == 202


def test_a_credential_for_one_warehouses_container_cannot_read_anothers(
    client, cloud_stack, table
):
    info = cloud_stack.info
    assert info.azure is not None
    container = f"other{uuid.uuid4().hex[:8]}"
    azurite.create_container(info.azure.blob_endpoint, container)
    admin = info.idp.clients["admin"]
    token = fetch_token(info.idp.token_url, admin.id, admin.secret)
    spec = adls_warehouse(
        f"adls_{container}", account=info.azure.account, account_key=azurite.ACCOUNT_KEY,
        container=container, key_prefix="lake", host=info.azure.host, validity_s=3600,
    )  # fmt: skip
    create_warehouse(info.catalog.url, token, spec, info.namespace)
    with Client(f"unix:{info.gateway.uds}", warehouse=spec.name) as other:
        other.create(info.namespace, "t", format="parquet")
        theirs = _creds(other, cloud_stack, "t", "write")
    assert fs_path(theirs.location).startswith(f"{container}/lake/")
    assert _put(_blob_url(cloud_stack, theirs, "secret")) == 201
    ours = _creds(client, cloud_stack, table, "write")
    foreign = f"{info.azure.blob_endpoint}/{fs_path(theirs.location)}/secret?{ours.config[SAS_KEY]}"
    assert _get(foreign) == 403
    assert _put(foreign.replace("/secret?", "/planted?")) == 403


def test_an_expired_sas_is_refused_by_the_store(cloud_stack, hooks, table):
    """A true expiry test: the SAS lives 4 s, Azurite serves it, then refuses it."""
    info = cloud_stack.info
    direct = info.idp.clients["direct"]
    token = fetch_token(info.idp.token_url, direct.id, direct.secret)
    hooks.set_faults(credential_lifetime_s=4)
    wh = info.warehouse_for("adls").id
    resp = httpx.get(
        f"{info.catalog.url}/lakekeeper/v1/{wh}/namespaces/{info.namespace}/generic-tables/"
        f"{table}/credentials",
        headers={"Authorization": f"Bearer {token}"}, trust_env=False, timeout=10,
    )  # fmt: skip
    assert resp.status_code == 200, resp.text
    [cred] = resp.json()["storage-credentials"]
    creds = TableCredentials.from_parts(
        location=cred["prefix"], credentials=[_storage_credential(cred)]
    ).with_storage_endpoint(info.azure.blob_endpoint if info.azure else None)
    assert _put(_blob_url(cloud_stack, creds, "short")) == 201
    assert creds.remaining_s is not None
    assert creds.remaining_s <= 4
    time.sleep(max(0.0, creds.remaining_s) + 1.5)
    assert _get(_blob_url(cloud_stack, creds, "short")) == 403
    assert _put(_blob_url(cloud_stack, creds, "late")) == 403


def _storage_credential(raw: dict[str, Any]) -> Any:
    from lakegate_client import StorageCredential

    return StorageCredential(prefix=raw["prefix"], config=raw["config"])


@pytest.mark.slow
def test_gateway_refreshes_a_short_sas_before_the_store_refuses_it(
    client, cloud_stack, hooks, table
):
    """Credentials of 10 s (the store enforces them): for 20 s every credential the gateway
    serves works at the store; the gateway moved to new ones ahead of expiry, and an old one
    is refused once expired (so the store, not luck, decided)."""
    hooks.set_faults(credential_lifetime_s=10)
    writer = _creds(client, cloud_stack, table, "write")
    assert _put(_blob_url(cloud_stack, writer, "data")) == 201
    seen: dict[int, TableCredentials] = {}
    lowest = float("inf")
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        creds = _creds(client, cloud_stack, table, "read")
        assert creds.expires_at_ms is not None
        remaining = creds.remaining_s
        assert remaining is not None
        lowest = min(lowest, remaining)
        assert _get(_blob_url(cloud_stack, creds, "data")) == 200, remaining
        seen.setdefault(creds.expires_at_ms, creds)
        time.sleep(0.5)
    # 20 s of reads on 10 s credentials, every one accepted: the gateway moved on in time.
    assert len(seen) >= 2, sorted(seen)
    # The gateway's floor is 2 s; measured here after the answer's round trip (a loaded
    # machine may take a moment), so 1 s.
    assert lowest > 1
    oldest = seen[min(seen)]
    assert oldest.remaining_s is not None
    assert oldest.remaining_s < 0
    assert _get(_blob_url(cloud_stack, oldest, "data")) == 403


def test_consumers_write_and_read_on_azurite(client, cloud_stack, table):
    """pyarrow AzureFileSystem, adlfs, Lance, deltalake and DuckDB's azure extension, each
    with the gateway's credential and the endpoint override, rows exact."""
    import adlfs
    import deltalake
    import lance

    creds = _creds(client, cloud_stack, table, "write")
    root = fs_path(creds.location)
    fs = creds.pyarrow_filesystem()
    pq.write_table(ROWS, f"{root}/pa/part-0.parquet", filesystem=fs)
    assert pq.read_table(f"{root}/pa/part-0.parquet", filesystem=fs).equals(ROWS)

    afs = adlfs.AzureBlobFileSystem(**creds.fsspec_kwargs())
    with afs.open(f"{root}/pa/part-0.parquet", "rb") as handle:
        assert pq.read_table(handle).equals(ROWS)

    options = creds.lance_storage_options()
    lance.write_dataset(ROWS, f"{creds.location}/lance", storage_options=options)
    got = lance.dataset(f"{creds.location}/lance", storage_options=options)
    assert got.to_table().sort_by("id").equals(ROWS)
    versions = f"{creds.location}/lance-versions"
    for mode in ("create", "append"):
        lance.write_dataset(ROWS, versions, mode=mode, storage_options=options)
    # a write's planning reads the version from one page of Azurite's List Blobs (maxresults)
    store = AzureBlobStore.for_credentials(creds)
    assert newest_version(store, S3Location.parse(versions)) == 2

    deltalake.write_deltalake(
        f"{creds.location}/delta", ROWS, storage_options=creds.delta_storage_options()
    )
    delta = deltalake.DeltaTable(
        f"{creds.location}/delta", storage_options=creds.delta_storage_options()
    )
    assert delta.to_pyarrow_table().sort_by("id").equals(ROWS)

    reader = _creds(client, cloud_stack, table, "read")
    # pyiceberg's FsspecFileIO maps the vended `adls.sas-token.<account>.<host>`; a local
    # endpoint goes in as `adls.connection-string` (adlfs forces https for an account host).
    from pyiceberg.io.fsspec import FsspecFileIO

    io = FsspecFileIO(properties={
        **reader.config, "adls.connection-string": reader.fsspec_kwargs()["connection_string"],
    })  # fmt: skip
    with io.new_input(f"{reader.location}/pa/part-0.parquet").open() as handle:
        assert pq.read_table(handle).equals(ROWS)
    con = connect(formats=("parquet", "lance"), storages=("adls",))
    try:
        con.execute(table_secret_sql("pq", "parquet", reader))
        scan = scan_expression("parquet", duckdb_location(reader) + "/pa")
        query = f"SELECT count(*), sum(id) FROM {scan}"  # noqa: S608 - our own scan
        assert con.sql(query).fetchall() == [(50, 1225)]
        lance_creds = TableCredentials.from_parts(
            location=f"{reader.location}/lance", credentials=list(reader.storage_credentials)
        ).with_storage_endpoint(reader.storage_endpoint)
        con.execute(table_secret_sql("ln", "lance", lance_creds))
        scan = scan_expression("lance", duckdb_location(lance_creds))
        query = f"SELECT count(*), sum(id) FROM {scan}"  # noqa: S608 - our own scan
        assert con.sql(query).fetchall() == [(50, 1225)]
    finally:
        con.close()
    read_fs = reader.pyarrow_filesystem()
    assert pq.read_table(f"{root}/pa/part-0.parquet", filesystem=read_fs).equals(ROWS)
    with pytest.raises(OSError):  # noqa: PT011 - pyarrow maps the 403 to a plain OSError
        pq.write_table(ROWS, f"{root}/pa/part-1.parquet", filesystem=read_fs)


def test_a_tables_sas_is_lakekeepers_directory_sas_and_reaches_no_other_table(
    client, cloud_stack, table
):
    """Issue 50 item 9: the emulator vended a container SAS (`sr=c`), so a table's credential
    read, wrote and listed every other table's prefix. It vends Lakekeeper's directory SAS now
    (`sr=d`, `sdd` = the table path's depth), which the stack's SAS-checking layer enforces."""
    from urllib.parse import parse_qs

    info = cloud_stack.info
    assert info.azure is not None
    neighbour = f"az_{uuid.uuid4().hex[:8]}"
    client.create(info.namespace, neighbour, format="parquet")
    ours = _creds(client, cloud_stack, table, "write")
    theirs = _creds(client, cloud_stack, neighbour, "write")
    sas = parse_qs(ours.config[SAS_KEY])
    assert sas["sr"] == ["d"]
    assert sas["sdd"] == [str(len(fs_path(ours.location).split("/")) - 1)]  # below the container
    assert _put(_blob_url(cloud_stack, theirs, "secret")) == 201
    assert _put(_blob_url(cloud_stack, ours, "mine")) == 201
    # our SAS on their prefix: read, write, delete and list are all refused
    foreign = f"{info.azure.blob_endpoint}/{fs_path(theirs.location)}/secret?{ours.config[SAS_KEY]}"
    assert _get(foreign) == 403
    assert _put(foreign.replace("/secret?", "/planted?")) == 403
    assert httpx.delete(foreign, trust_env=False, timeout=10).status_code == 403
    container, _, their_key = fs_path(theirs.location).partition("/")
    _, _, our_key = fs_path(ours.location).partition("/")
    listing = f"{info.azure.blob_endpoint}/{container}?restype=container&comp=list&prefix="
    assert _get(f"{listing}{their_key}%2F&{ours.config[SAS_KEY]}") == 403
    assert _get(f"{listing}&{ours.config[SAS_KEY]}") == 403  # the whole container
    # ...while our own prefix lists, and shows our blob only
    mine = httpx.get(f"{listing}{our_key}%2F&{ours.config[SAS_KEY]}", trust_env=False, timeout=10)
    assert mine.status_code == 200
    assert "mine" in mine.text
    assert "secret" not in mine.text
    # the store itself was never reached with a directory SAS: Azurite would refuse it anyway
    assert info.azure.server_endpoint is not None
    direct = _blob_url(cloud_stack, ours, "mine").replace(info.azure.blob_endpoint,
                                                          info.azure.server_endpoint)
    assert _get(direct) == 403
