"""pylakekeeper 0.4.0, unmodified, with base_url = the gateway (routes: docs/contracts.md §5)."""

from __future__ import annotations

import uuid

import httpx
import lance
import pyarrow as pa
import pytest
from pylakekeeper import Client, NotFoundError, StaticToken

from devstack.stack_info import StackInfo

pytestmark = pytest.mark.integration


@pytest.fixture
def lk(info: StackInfo) -> Client:
    # Callers mode none: whatever token pylakekeeper sends is fine.
    client = Client(base_url=info.gateway_url, warehouse="demo",
                    auth=StaticToken("any-token-at-all"))
    yield client
    client.close()


# Lakekeeper accepts `/` and spaces in generic table names (only empty and `+` are refused): the
# gateway must carry them end to end, percent-encoded in every upstream path segment.
@pytest.mark.parametrize("stem", ["users", "team a/users 2026"])
def test_create_load_vended_lance_write_read_list_drop(
    lk: Client, info: StackInfo, stem: str
) -> None:
    ns = info.namespace
    name = f"{stem}_{uuid.uuid4().hex[:8]}"
    created = lk.generic_tables.create(ns, name, format="lance", doc="test table",
                                       properties={"lance.version": "0.20"})
    assert created.table.name == name
    assert created.table.base_location.startswith("s3://")

    loaded = lk.generic_tables.load(ns, name, vended=True)
    opts = loaded.lance_storage_options
    assert {"aws_access_key_id", "aws_secret_access_key", "aws_session_token"} <= set(opts)
    assert loaded.expires_at is not None
    assert not loaded.expires_within(120)

    data = pa.table({"user_id": [1, 2, 3, 4, 5], "name": ["Alice", "Bob", "C", "D", "E"]})
    lance.write_dataset(data, loaded.location, storage_options=opts)
    back = lance.dataset(loaded.location, storage_options=opts).to_table()
    assert back.num_rows == 5
    assert "Alice" in back.column("name").to_pylist()
    assert name in [t.name for t in lk.generic_tables.list(ns)]

    lk.generic_tables.drop(ns, name)
    with pytest.raises(NotFoundError):
        lk.generic_tables.load(ns, name)


def test_list_follows_pagination(lk: Client, info: StackInfo) -> None:
    ns = f"pg_{uuid.uuid4().hex[:8]}"
    with httpx.Client(base_url=info.gateway_url, trust_env=False, timeout=30) as raw:
        resp = raw.post("/catalog/v1/demo/namespaces", json={"namespace": [ns]},
                        headers={"Authorization": "Bearer x"})
        assert resp.status_code == 200, resp.text
    names = {f"p{i}" for i in range(5)}
    for n in names:
        lk.generic_tables.create(ns, n, format="lance")
    listed = [t.name for t in lk.generic_tables.list(ns, page_size=2)]
    assert sorted(listed) == sorted(names)  # every page followed, no repeats


def test_duplicate_create_is_conflict_and_whoami_is_local(lk: Client, info: StackInfo) -> None:
    from pylakekeeper import ConflictError

    name = f"dup_{uuid.uuid4().hex[:8]}"
    lk.generic_tables.create(info.namespace, name, format="lance")
    with pytest.raises(ConflictError):
        lk.generic_tables.create(info.namespace, name, format="lance")
    assert lk.whoami()["id"] == "oidc~anonymous"  # Lakekeeper's id form, the local caller


def test_warehouse_uuid_prefix_works_too(info: StackInfo) -> None:
    with Client(base_url=info.gateway_url, warehouse=info.warehouse.id,
                auth=StaticToken("t")) as client:
        name = f"byid_{uuid.uuid4().hex[:8]}"
        client.generic_tables.create(info.namespace, name, format="lance")
        assert client.generic_tables.load(info.namespace, name).table.name == name


def test_rename_and_credentials_over_raw_http(info: StackInfo) -> None:
    ns = info.namespace
    name = f"ren_{uuid.uuid4().hex[:8]}"
    base = f"/lakekeeper/v1/demo/namespaces/{ns}/generic-tables"
    with httpx.Client(base_url=info.gateway_url, trust_env=False, timeout=30,
                      headers={"Authorization": "Bearer x"}) as raw:
        created = raw.post(base, json={"name": name, "format": "lance"}).json()
        creds = raw.get(f"{base}/{name}/credentials")
        assert creds.status_code == 200
        cfg = creds.json()["storage-credentials"][0]["config"]
        assert {"s3.access-key-id", "s3.secret-access-key", "s3.session-token"} <= set(cfg)
        assert creds.headers["cache-control"] == "no-store"  # it carries keys (issue 50)
        resp = raw.post("/lakekeeper/v1/demo/generic-tables/rename", json={
            "source": {"namespace": [ns], "name": name},
            "destination": {"namespace": [ns], "name": name + "_new"}})
        assert resp.status_code == 204
        assert raw.get(f"{base}/{name}").status_code == 404
        moved = raw.get(f"{base}/{name}_new")
        assert moved.status_code == 200
        assert moved.json()["table"]["base-location"] == created["table"]["base-location"]
        assert raw.get(f"{base}/{name}/credentials").status_code == 404


def test_pylakekeepers_own_usage_with_the_default_projects_nil_uuid(info: StackInfo) -> None:
    """Issue #35 finding 6: pylakekeeper's own integration test passes
    `project_id="00000000-0000-0000-0000-000000000000"` (Lakekeeper's default project); a
    gateway without UPSTREAM__PROJECT_ID, which serves that very project, answered its first
    list call 403 ProjectNotAllowed."""
    lk = Client(base_url=info.gateway_url, warehouse="demo", auth=StaticToken("any-token-at-all"),
                project_id="00000000-0000-0000-0000-000000000000")
    try:
        ns = info.namespace
        name = f"nilproj_{uuid.uuid4().hex[:8]}"
        lk.generic_tables.create(ns, name, format="lance")
        assert name in [t.name for t in lk.generic_tables.list(ns)]
        loaded = lk.generic_tables.load(ns, name, vended=True)
        assert "aws_access_key_id" in loaded.lance_storage_options
        lk.generic_tables.drop(ns, name)
    finally:
        lk.close()
