"""The Lakekeeper-compatible surface: pylakekeeper's wire shapes (docs/contracts.md §5)."""

from __future__ import annotations

from urllib.parse import quote

import pytest

from gateway.models import AccessMode, Outcome
from gateway.surfaces.callers import StaticTokenCallerAuth
from gateway.surfaces.policy import CallerPolicy, parse_rules
from tests.unit.surfaces.conftest import AUTH, VENDED, MakeClient, count
from tests.unit.surfaces.fake_operations import (
    ROTATED_KEYS,
    SERVED_ICEBERG_ENDPOINTS,
    WAREHOUSE,
    FakeOperations,
    RotatingOperations,
)

GT = "/lakekeeper/v1/{wh}/namespaces/{ns}/generic-tables"


def gt(wh: str = "demo", ns: str = "demo_ns") -> str:
    return GT.format(wh=quote(wh, safe=""), ns=ns)


async def test_load_vended_has_string_config_and_credentials(
    make_client: MakeClient, fake_ops: FakeOperations, metrics
) -> None:
    fake_ops.outcome = Outcome.HIT
    client = await make_client()
    resp = await client.get(gt() + "/orders", headers=VENDED)
    assert resp.status == 200
    assert resp.headers["Cache-Control"] == "no-store"  # it carries keys (issue 50)
    assert "x-iceberg-access-delegation" in resp.headers["Vary"]
    doc = await resp.json()
    table = doc["table"]
    assert table["base-location"].startswith("s3://")
    assert table["protected"] is False
    assert "properties" not in table or isinstance(table["properties"], dict)
    assert all(isinstance(v, str) for v in doc["config"].values())
    cred = doc["storage-credentials"][0]
    assert set(cred) == {"prefix", "config"}
    assert all(isinstance(v, str) for v in cred["config"].values())
    assert "s3.session-token-expires-at-ms" in cred["config"]
    # Lakekeeper: anything but client-managed-only is "server chooses" (vend): one cache key.
    assert fake_ops.contexts[-1].delegation is None
    assert count(metrics, "rest", "credential", "hit") == 1


async def test_load_with_client_managed_delegation_vends_nothing(
    make_client: MakeClient, fake_ops: FakeOperations
) -> None:
    client = await make_client()
    resp = await client.get(gt() + "/orders",
                            headers={**AUTH, "X-Iceberg-Access-Delegation": "client-managed"})
    doc = await resp.json()
    assert "storage-credentials" not in doc


async def test_prefix_accepts_uuid_and_name(make_client: MakeClient) -> None:
    client = await make_client()
    for wh in ("demo", WAREHOUSE.id):
        resp = await client.get(gt(wh) + "/orders", headers=VENDED)
        assert resp.status == 200


async def test_write_is_vended_when_the_policy_allows_it_else_read(
    make_client: MakeClient, fake_ops: FakeOperations
) -> None:
    client = await make_client()
    await client.get(gt() + "/orders/credentials", headers=AUTH)
    assert fake_ops.accesses == [AccessMode.WRITE]
    policy = CallerPolicy(parse_rules({"callers": {"*": [
        {"warehouse": "demo", "namespace": "*", "table": "*", "access": "read"}]}}, "t"))
    client = await make_client(policy=policy)
    resp = await client.get(gt() + "/orders/credentials", headers=AUTH)
    assert resp.status == 200
    assert list(await resp.json()) == ["storage-credentials"]
    assert fake_ops.accesses[-1] is AccessMode.READ


async def test_missing_table_is_404_with_lakekeeper_type(make_client: MakeClient) -> None:
    client = await make_client()
    resp = await client.get(gt() + "/nope", headers=VENDED)
    assert resp.status == 404
    assert resp.headers["Cache-Control"] == "private"
    err = (await resp.json())["error"]
    assert err["type"] == "NoSuchGenericTableException"


async def test_create_duplicate_is_409_and_create_passes_extra_keys(
    make_client: MakeClient, fake_ops: FakeOperations
) -> None:
    client = await make_client()
    body = {"name": "t1", "format": "lance", "base-location": "s3://warehouse/x",
            "properties": {"a": "b"}, "schema": {"fields": []}}
    resp = await client.post(gt(), json=body, headers=AUTH)
    assert resp.status == 200
    assert (await resp.json())["table"]["name"] == "t1"
    resp = await client.post(gt(), json=body, headers=AUTH)
    assert resp.status == 409


async def test_list_passes_page_tokens_and_ends_with_null(
    make_client: MakeClient, fake_ops: FakeOperations
) -> None:
    for i in range(3):
        fake_ops.add_table(("demo_ns",), f"t{i}")
    client = await make_client()
    seen: list[str] = []
    token = None
    for _ in range(10):
        params = {"pageSize": "2", **({"pageToken": token} if token else {})}
        doc = await (await client.get(gt(), params=params, headers=AUTH)).json()
        seen += [i["name"] for i in doc["identifiers"]]
        assert all({"namespace", "name", "format", "id"} <= set(i) for i in doc["identifiers"])
        token = doc.get("next-page-token")
        if token is None:  # Lakekeeper omits a null token
            assert "next-page-token" not in doc
            break
    assert sorted(seen) == ["orders", "t0", "t1", "t2"]


async def test_multilevel_namespace_and_encoded_names(
    make_client: MakeClient, fake_ops: FakeOperations
) -> None:
    fake_ops.add_table(("ai", "test"), "my table/x")
    client = await make_client()
    resp = await client.get(
        gt(ns="ai%1Ftest") + "/" + quote("my table/x", safe=""), headers=VENDED)
    assert resp.status == 200
    # Lakekeeper: anything but client-managed-only is "server chooses" (vend): one cache key.
    assert fake_ops.contexts[-1].delegation is None


async def test_drop_and_rename(make_client: MakeClient, fake_ops: FakeOperations) -> None:
    client = await make_client()
    resp = await client.post(
        "/lakekeeper/v1/demo/generic-tables/rename",
        json={"source": {"namespace": ["demo_ns"], "name": "orders"},
              "destination": {"namespace": ["demo_ns"], "name": "orders2"}}, headers=AUTH)
    assert resp.status == 204
    resp = await client.delete(gt() + "/orders2", headers=AUTH)
    assert resp.status == 204
    resp = await client.delete(gt() + "/orders2", headers=AUTH)
    assert resp.status == 404


async def test_whoami_is_answered_locally(
    make_client: MakeClient, fake_ops: FakeOperations
) -> None:
    client = await make_client(auth=StaticTokenCallerAuth({"tok-bob-1234": "bob"}))
    resp = await client.get("/management/v1/whoami",
                            headers={"Authorization": "Bearer tok-bob-1234"})
    doc = await resp.json()
    assert doc["id"] == "oidc~bob"  # Lakekeeper's id form
    assert doc["name"] == "bob"
    assert sum(fake_ops.calls.values()) == 0


async def test_config_points_iceberg_clients_at_the_gateway(make_client: MakeClient) -> None:
    client = await make_client()
    resp = await client.get("/catalog/v1/config", params={"warehouse": "demo"}, headers=AUTH)
    doc = await resp.json()
    assert doc["defaults"]["prefix"] == WAREHOUSE.id
    assert doc["overrides"]["uri"] == f"http://{client.host}:{client.port}/catalog"
    # Exactly the catalog's endpoints the gateway has routes for, in the catalog's order.
    assert doc["endpoints"] == SERVED_ICEBERG_ENDPOINTS
    resp = await client.get("/catalog/v1/config", headers=AUTH)
    assert resp.status == 400


async def test_namespace_reads_are_forwarded_with_the_uuid_prefix(
    make_client: MakeClient, fake_ops: FakeOperations
) -> None:
    client = await make_client()
    resp = await client.get("/catalog/v1/demo/namespaces", params={"parent": "x"}, headers=AUTH)
    assert resp.status == 200
    assert fake_ops.forwarded == [("GET", f"/catalog/v1/{WAREHOUSE.id}/namespaces", "parent=x")]


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("GET", "/management/v1/warehouse"),
        ("POST", "/management/v1/bootstrap"),
        ("GET", "/catalog/v1/demo/namespaces/demo_ns/views"),  # Iceberg tables are served
        ("DELETE", "/catalog/v1/demo/namespaces/demo_ns"),
        ("GET", "/lakekeeper/v1/demo/something-else"),
        # multi-table commits: each body would name tables the policy never saw (issue 50)
        ("POST", "/catalog/v1/demo/transactions/commit"),
    ],
)
async def test_routes_outside_the_allow_list_are_not_forwarded(
    make_client: MakeClient, fake_ops: FakeOperations, method: str, path: str
) -> None:
    client = await make_client()
    resp = await client.request(method, path, headers=AUTH)
    assert resp.status in (404, 405)
    assert fake_ops.forwarded == []
    if resp.status == 404:
        assert (await resp.json())["error"]["type"] == "RouteNotAllowed"


async def test_token_mode_refuses_unknown_tokens_with_401(make_client: MakeClient) -> None:
    client = await make_client(auth=StaticTokenCallerAuth({"tok-bob-1234": "bob"}))
    resp = await client.get(gt() + "/orders", headers=AUTH)
    assert resp.status == 401
    assert (await resp.json())["error"]["type"] == "AuthenticationFailed"  # Lakekeeper's type
    resp = await client.get(gt() + "/orders", headers={"X-Lakegate-Request": "1"})
    assert resp.status == 401
    assert (await resp.json())["error"]["type"] == "MissingAuthorizationHeader"


async def test_a_rotated_credential_is_served_at_once_on_the_lakekeeper_route(
    make_client: MakeClient, rotating_ops: RotatingOperations
) -> None:
    client = await make_client(ops=rotating_ops)

    async def key() -> str:
        resp = await client.get(gt() + "/orders/credentials", headers=AUTH)
        assert resp.status == 200
        doc = await resp.json()
        return str(doc["storage-credentials"][0]["config"]["s3.access-key-id"])

    assert await rotating_ops.keys_across_rotation(key) == ROTATED_KEYS


async def test_client_managed_load_is_the_catalogs_answer(
    make_client: MakeClient, fake_ops: FakeOperations
) -> None:
    client = await make_client()
    headers = [("Authorization", "Bearer x"), ("X-Iceberg-Access-Delegation", "client-managed")]
    resp = await client.get(gt() + "/orders", headers=headers)
    assert resp.status == 200
    assert fake_ops.calls["load_table"] == 0
    method, path, _ = fake_ops.forwarded[-1]
    assert (method, path) == (
        "GET", f"/lakekeeper/v1/{WAREHOUSE.id}/namespaces/demo_ns/generic-tables/orders")
    # A second line asking for vended credentials is merged: the cache answers, no forward.
    both = [*headers, ("X-Iceberg-Access-Delegation", "vended-credentials")]
    resp = await client.get(gt() + "/orders", headers=both)
    assert "storage-credentials" in await resp.json()
    assert len(fake_ops.forwarded) == 1


@pytest.mark.parametrize("size", ["0", "-2", "5000"])
async def test_page_size_is_clamped_not_refused(
    make_client: MakeClient, fake_ops: FakeOperations, size: str
) -> None:
    client = await make_client()
    resp = await client.get(gt(), params={"pageSize": size}, headers=AUTH)
    assert resp.status == 200
    assert "orders" in [i["name"] for i in (await resp.json())["identifiers"]]


async def test_page_size_is_clamped_to_the_configured_maximum(
    make_client: MakeClient, fake_ops: FakeOperations
) -> None:
    fake_ops.add_table(("demo_ns",), "second")
    client = await make_client(max_page_size=1)  # upstream.max_page_size, one bound for all
    resp = await client.get(gt(), params={"pageSize": "5000"}, headers=AUTH)
    assert resp.status == 200
    doc = await resp.json()
    assert [i["name"] for i in doc["identifiers"]] == ["orders"]
    assert doc["next-page-token"]


@pytest.mark.parametrize(("value", "status"), [("t", 204), ("True", 204), ("yes", 400)])
async def test_drop_query_booleans_are_lakekeepers(
    make_client: MakeClient, fake_ops: FakeOperations, value: str, status: int
) -> None:
    client = await make_client()
    resp = await client.delete(gt() + "/orders", params={"force": value}, headers=AUTH)
    assert resp.status == status


async def test_any_request_id_is_echoed_on_the_lakekeeper_surface(make_client: MakeClient) -> None:
    client = await make_client()
    resp = await client.get(gt(), headers={**AUTH, "x-request-id": "not a uuid"})
    assert resp.headers["x-request-id"] == "not a uuid"


@pytest.mark.parametrize("given", ["not a uuid", "caf\u00e9-42"])
async def test_the_credentials_answer_echoes_any_request_id(make_client: MakeClient,
                                                            given: str) -> None:
    """The prebuilt credential answer (bytes_response.py) echoes like every other answer, a
    non-ASCII id through the regular response path, with Lakekeeper's cache headers."""
    client = await make_client()
    resp = await client.get(gt() + "/orders/credentials",
                            headers={**AUTH, "x-request-id": given})
    assert resp.status == 200
    assert resp.headers["x-request-id"] == given
    assert resp.headers.getall("Cache-Control") == ["no-store"]  # it carries keys
    assert resp.headers["Vary"].startswith("authorization")
    assert list(await resp.json()) == ["storage-credentials"]


def _alice_policy(warehouse: str = "demo") -> CallerPolicy:
    return CallerPolicy(parse_rules({"callers": {"alice": [
        {"warehouse": warehouse, "namespace": "team_a", "table": "*", "access": "read"}]}}, "t"))


ALICE_AUTH = {"Authorization": "Bearer tok-alice-123"}


@pytest.mark.parametrize(("rule", "given", "status"), [
    ("demo", "demo", 200), ("demo", WAREHOUSE.id, 200), ("other", "demo", 403),
    ("other", WAREHOUSE.id, 403), (WAREHOUSE.id[:2] + "*", WAREHOUSE.id, 403),
])
async def test_the_warehouse_look_up_applies_the_caller_policy(
    make_client: MakeClient, rule: str, given: str, status: int
) -> None:
    """Issue #35 item 6: `/management/v1/warehouse/{wh}` told any caller any warehouse's id."""
    client = await make_client(policy=_alice_policy(rule),
                               auth=StaticTokenCallerAuth({"tok-alice-123": "alice"}))
    resp = await client.get(f"/management/v1/warehouse/{given}", headers=ALICE_AUTH)
    assert resp.status == status
    if status == 200:
        assert (await resp.json())["id"] == WAREHOUSE.id


@pytest.mark.parametrize(("parent", "status", "forwarded"), [
    ("team_a", 200, True), ("team_b", 403, False), ("team_a&parent=team_b", 400, False),
    ("team_a%1Fsub", 403, False), ("a%23b", 400, False),
])
async def test_a_namespace_listing_under_a_parent_applies_the_caller_policy(
    make_client: MakeClient, fake_ops: FakeOperations, parent: str, status: int,
    forwarded: bool,
) -> None:
    """Issue #35 item 6: `?parent=` listed any namespace's children for any caller."""
    client = await make_client(policy=_alice_policy(),
                               auth=StaticTokenCallerAuth({"tok-alice-123": "alice"}))
    resp = await client.get(f"/catalog/v1/demo/namespaces?parent={parent}", headers=ALICE_AUTH)
    assert resp.status == status
    assert bool(fake_ops.forwarded) is forwarded
    if forwarded:
        assert fake_ops.forwarded[-1][2] == f"parent={parent}"


async def test_every_answer_carrying_keys_says_no_store(make_client: MakeClient) -> None:
    """Issue 50 item 7: Lakekeeper's `private` let a private cache keep storage keys; every
    answer that carries them (the gateway's own and the catalog's passed through) says
    `no-store`, on the hot path and off it; an answer without keys keeps Lakekeeper's."""
    from tests.unit.surfaces.test_http_iceberg import TABLE, _ops

    ops = _ops()
    client = await make_client(ops=ops)
    for _ in range(2):  # the second answer of a target is the prebuilt one
        for path, headers in ((gt() + "/orders", VENDED), (gt() + "/orders/credentials", AUTH),
                              (TABLE, VENDED), (TABLE + "/credentials", AUTH)):
            resp = await client.get(path, headers=headers)
            assert resp.status == 200, path
            assert resp.headers.getall("Cache-Control") == ["no-store"], path
            assert "storage-credentials" in await resp.json()
    # the catalog's own answer with keys (a create forwarded with the caller's delegation)
    ops.answers["POST"] = (200, {"metadata": {"location": "s3://w/x"}, "config": {
        "s3.secret-access-key": "wJalrXUtnFEMI", "s3.access-key-id": "ASIAEXAMPLE"}})
    resp = await client.post("/catalog/v1/demo/namespaces/demo_ns/tables",
                             json={"name": "t2", "schema": {}}, headers=VENDED)
    assert resp.headers.getall("Cache-Control") == ["no-store"]
    resp = await client.get(TABLE, headers={**AUTH, "X-Iceberg-Access-Delegation":
                                            "client-managed"})
    assert resp.headers.getall("Cache-Control") == ["private"]  # no keys: Lakekeeper's own


async def test_config_and_the_top_level_namespace_list_apply_the_caller_policy(
    make_client: MakeClient, fake_ops: FakeOperations
) -> None:
    """Issue 50 item 7: both skipped the policy, so any caller learned any warehouse's id and
    its namespaces."""
    alice = StaticTokenCallerAuth({"tok-alice-123": "alice"})
    client = await make_client(policy=_alice_policy("other"), auth=alice)
    resp = await client.get("/catalog/v1/config", params={"warehouse": "demo"},
                            headers=ALICE_AUTH)
    assert resp.status == 403
    assert (await client.get("/catalog/v1/demo/namespaces", headers=ALICE_AUTH)).status == 403
    assert fake_ops.forwarded == []
    assert fake_ops.calls["catalog_config"] == 0
    client = await make_client(policy=_alice_policy("demo"), auth=alice)
    resp = await client.get("/catalog/v1/config", params={"warehouse": "demo"},
                            headers=ALICE_AUTH)
    assert resp.status == 200
    assert (await client.get("/catalog/v1/demo/namespaces", headers=ALICE_AUTH)).status == 200
