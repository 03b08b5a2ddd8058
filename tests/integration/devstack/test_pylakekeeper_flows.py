"""pylakekeeper 0.4.0, unmodified, against the emulator with ClientCredentials from the real IdP."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import lance
import pyarrow as pa
import pylakekeeper as pk
import pytest

from devstack.launcher import Stack

pytestmark = pytest.mark.integration


@pytest.fixture
def client(bare_stack: Stack) -> Iterator[pk.Client]:
    info = bare_stack.info
    c = info.idp.clients["direct"]
    auth = pk.ClientCredentials(
        token_url=info.idp.token_url, client_id=c.id, client_secret=c.secret
    )
    with pk.Client(info.catalog.url, info.warehouse.id, auth) as cl:
        yield cl


def _name(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex[:8]}"


def test_create_then_repeat_create_is_conflict(client, bare_stack):
    ns, name = bare_stack.info.namespace, _name("Events")
    created = client.generic_tables.create(ns, name, format="lance", doc="d")
    assert created.table.name == name
    assert created.table.base_location.startswith("s3://warehouse/lakehouse/")
    assert created.storage_credentials is None
    with pytest.raises(pk.ConflictError):
        client.generic_tables.create(ns, name.upper(), format="lance")


def test_vended_load_writes_and_reads_lance_in_seaweedfs(client, bare_stack):
    ns, name = bare_stack.info.namespace, _name("users")
    client.generic_tables.create(ns, name, format="lance")
    loaded = client.generic_tables.load(ns, name.upper(), vended=True)
    creds = loaded.credentials
    assert creds["s3.endpoint"].endswith("/")
    assert creds["s3.path-style-access"] == "true"
    assert loaded.expires_at is not None
    assert not loaded.expires_within(1800)  # STC serves 50-100 % of a 3600 s lifetime
    opts = loaded.lance_storage_options
    assert opts["allow_http"] == "true"
    table = pa.table({"user_id": [1, 2, 3], "name": ["Alice", "Bob", "Carol"]})
    lance.write_dataset(table, loaded.location, storage_options=opts)
    back = lance.dataset(loaded.location, storage_options=opts).to_table()
    assert back.column("name").to_pylist() == ["Alice", "Bob", "Carol"]


def test_list_over_250_tables_yields_each_exactly_once(client, catalog, bare_stack):
    ns = _name("many")
    assert (
        catalog.http.post(
            f"/catalog/v1/{catalog.wh}/namespaces", json={"namespace": [ns]}
        ).status_code
        == 200
    )
    names = [f"t{i:03d}" for i in range(250)]
    with ThreadPoolExecutor(8) as pool:
        statuses = list(pool.map(lambda n: catalog.create(n, ns=ns).status_code, names))
    assert set(statuses) == {200}
    listed = [ident.name for ident in client.generic_tables.list(ns, page_size=7)]
    assert sorted(listed) == names
    assert len(listed) == len(set(listed)) == 250


def test_rename_keeps_location_and_frees_the_old_name(client, catalog, bare_stack):
    ns, name = bare_stack.info.namespace, _name("src")
    location = client.generic_tables.create(ns, name, format="lance").table.base_location
    resp = catalog.http.post(
        f"/lakekeeper/v1/{catalog.wh}/generic-tables/rename",
        json={
            "source": {"namespace": [ns], "name": name},
            "destination": {"namespace": [ns], "name": name + "_new"},
        },
    )
    assert resp.status_code == 204
    with pytest.raises(pk.NotFoundError):
        client.generic_tables.load(ns, name)
    assert client.generic_tables.load(ns, name + "_new").table.base_location == location


def test_drop_removes_the_table(client, bare_stack):
    ns, name = bare_stack.info.namespace, _name("gone")
    client.generic_tables.create(ns, name, format="lance")
    client.generic_tables.drop(ns, name)
    with pytest.raises(pk.NotFoundError):
        client.generic_tables.load(ns, name)
    assert name not in {t.name for t in client.generic_tables.list(ns)}


def test_credentials_endpoint_vends_without_delegation_header(client, catalog, bare_stack):
    ns, name = bare_stack.info.namespace, _name("creds")
    client.generic_tables.create(ns, name, format="lance")
    resp = catalog.http.get(f"{catalog.tables_path()}/{name}/credentials")
    assert resp.status_code == 200
    (cred,) = resp.json()["storage-credentials"]
    for key in (
        "s3.access-key-id",
        "s3.secret-access-key",
        "s3.session-token",
        "s3.session-token-expires-at-ms",
        "expiration-time",
    ):
        assert key in cred["config"]
    assert cred["prefix"] == client.generic_tables.load(ns, name).table.base_location
