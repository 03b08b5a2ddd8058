"""The native /v1 HTTP API against a fake service."""

from __future__ import annotations

import pytest
from yarl import URL

from gateway.errors import TableIdentityMismatchError, UnavailableError
from gateway.identity import ExpectedIdentity
from gateway.models import AccessMode, Outcome
from gateway.surfaces.callers import StaticTokenCallerAuth
from gateway.surfaces.policy import CallerPolicy, parse_rules
from tests.unit.surfaces.conftest import MakeClient, count, total_requests
from tests.unit.surfaces.fake_operations import (
    ROTATED_KEYS,
    WAREHOUSE,
    FakeOperations,
    RotatingOperations,
)

MARK = {"X-Lakegate-Request": "1"}
CREDS = "/v1/warehouses/demo/namespaces/demo_ns/tables/orders/credentials"


async def test_credentials_by_warehouse_name_carry_outcome_and_remaining(
    make_client: MakeClient, fake_ops: FakeOperations, metrics
) -> None:
    fake_ops.outcome = Outcome.COALESCED
    client = await make_client()
    resp = await client.get(CREDS, headers=MARK)
    assert resp.status == 200
    doc = await resp.json()
    assert doc["warehouse_id"] == WAREHOUSE.id
    assert doc["namespace"] == ["demo_ns"]
    assert doc["table"] == "orders"
    assert doc["access"] == "read"
    assert doc["outcome"] == "coalesced"
    assert doc["remaining_s"] == 3600.0
    assert doc["identity_ttl_s"] == 30.0
    assert doc["credentials"][0]["config"]["s3.access-key-id"].startswith("ASIA")
    assert isinstance(doc["expires_at_ms"], int)
    assert count(metrics, "http", "credential", "coalesced") == 1
    assert total_requests(metrics) == 1


async def test_credentials_by_warehouse_uuid_and_write_access(
    make_client: MakeClient, fake_ops: FakeOperations
) -> None:
    client = await make_client()
    resp = await client.get(
        f"/v1/warehouses/{WAREHOUSE.id}/namespaces/demo_ns/tables/orders/credentials",
        params={"access": "write"}, headers=MARK,
    )
    assert resp.status == 200
    assert fake_ops.accesses == [AccessMode.WRITE]


async def test_request_without_marker_or_auth_is_refused_as_forgeable(
    make_client: MakeClient, fake_ops: FakeOperations, metrics
) -> None:
    client = await make_client()
    resp = await client.get(CREDS)
    assert resp.status == 403
    assert (await resp.json())["error"]["type"] == "ForgeableRequest"
    assert fake_ops.calls["get_credentials"] == 0
    assert count(metrics, "http", "credential", "denied") == 1
    assert metrics.registry.get_sample_value(
        "lakegate_ingress_rejected_total", {"reason": "ssrf_header"}) == 1


@pytest.mark.parametrize(
    "headers",
    [
        {"X-Forwarded-For": "10.0.0.1", "X-Lakegate-Request": "1"},
        {"Origin": "http://evil.example", "X-Lakegate-Request": "1"},
        {"Sec-Fetch-Site": "cross-site", "Authorization": "Bearer x"},
    ],
)
async def test_browser_or_proxied_requests_are_refused(
    make_client: MakeClient, fake_ops: FakeOperations, headers: dict[str, str]
) -> None:
    client = await make_client()
    resp = await client.get(CREDS, headers=headers)
    assert resp.status == 403
    assert (await resp.json())["error"]["type"] == "ForgeableRequest"
    assert fake_ops.calls["get_credentials"] == 0


async def test_authorization_header_alone_satisfies_the_marker_rule(
    make_client: MakeClient,
) -> None:
    client = await make_client()
    resp = await client.get(CREDS, headers={"Authorization": "Bearer anything"})
    assert resp.status == 200


async def test_unknown_table_is_404_envelope_with_upstream_type(
    make_client: MakeClient, metrics
) -> None:
    client = await make_client()
    resp = await client.get(
        "/v1/warehouses/demo/namespaces/demo_ns/tables/nope/credentials", headers=MARK)
    assert resp.status == 404
    err = (await resp.json())["error"]
    assert err["type"] == "NoSuchGenericTableException"
    assert err["code"] == 404
    assert err["stack"][0].startswith("Error ID: ")
    assert count(metrics, "http", "credential", "not_found") == 1


async def test_unknown_warehouse_is_404(make_client: MakeClient) -> None:
    client = await make_client()
    resp = await client.get(
        "/v1/warehouses/nowhere/namespaces/demo_ns/tables/orders/credentials", headers=MARK)
    assert resp.status == 404
    assert (await resp.json())["error"]["type"] == "NoSuchWarehouseException"


async def test_upstream_unavailable_renders_503_with_retry_after(
    make_client: MakeClient, fake_ops: FakeOperations
) -> None:
    fake_ops.errors["get_credentials"] = UnavailableError("catalog down", retry_after_s=7)
    client = await make_client()
    resp = await client.get(CREDS, headers=MARK)
    assert resp.status == 503
    assert resp.headers["Retry-After"] == "7"


@pytest.mark.parametrize(
    ("path", "query"),
    [
        ("/v1/warehouses/demo/namespaces/%00bad/tables/orders/credentials", {}),
        ("/v1/warehouses/demo/namespaces/demo_ns/tables/%FF%FE/credentials", {}),
        ("/v1/warehouses/demo/namespaces/a%1F%1Fb/tables/orders/credentials", {}),
        (CREDS, {"access": "admin"}),
        ("/v1/warehouses/demo/namespaces/demo_ns/tables/%2E%2E/credentials", {}),
        ("/v1/warehouses/demo/namespaces/%2E/tables/orders/credentials", {}),
    ],
)
async def test_malformed_names_and_params_are_400(
    make_client: MakeClient, fake_ops: FakeOperations, path: str, query: dict[str, str]
) -> None:
    client = await make_client()
    # encoded=True: send the path byte for byte (no client-side dot-segment normalisation)
    url = URL(str(client.make_url("/")).rstrip("/") + path, encoded=True).with_query(query)
    resp = await client.session.get(url, headers=MARK)
    assert resp.status == 400
    assert (await resp.json())["error"]["code"] == 400
    assert fake_ops.calls["get_credentials"] == 0


async def test_percent_encoded_slash_stays_inside_the_table_name(
    make_client: MakeClient, fake_ops: FakeOperations
) -> None:
    fake_ops.add_table(("a", "b"), "x/y")
    client = await make_client()
    resp = await client.get(
        "/v1/warehouses/demo/namespaces/a%1Fb/tables/x%2Fy/credentials", headers=MARK)
    assert resp.status == 200
    doc = await resp.json()
    assert doc["namespace"] == ["a", "b"]
    assert doc["table"] == "x/y"


async def test_create_list_load_rename_drop_round_trip(
    make_client: MakeClient, fake_ops: FakeOperations
) -> None:
    client = await make_client()
    base = "/v1/warehouses/demo/namespaces/demo_ns/tables"
    resp = await client.post(base, json={"name": "t1", "format": "lance"}, headers=MARK)
    assert resp.status == 200
    assert (await resp.json())["table"]["name"] == "t1"
    resp = await client.post(base, json={"name": "t1", "format": "lance"}, headers=MARK)
    assert resp.status == 409
    resp = await client.get(base, params={"page_size": "1"}, headers=MARK)
    page = await resp.json()
    assert len(page["identifiers"]) == 1
    assert page["next_page_token"] == "1"  # noqa: S105 - a page token
    resp = await client.get(f"{base}/t1", params={"vended": "true"}, headers=MARK)
    loaded = await resp.json()
    assert loaded["credentials"]
    assert loaded["warehouse_id"] == WAREHOUSE.id
    resp = await client.post(
        "/v1/warehouses/demo/tables/rename",
        json={"source": {"namespace": ["demo_ns"], "name": "t1"},
              "destination": {"namespace": ["demo_ns"], "name": "t2"}},
        headers=MARK,
    )
    assert resp.status == 204
    resp = await client.delete(f"{base}/t2", headers=MARK)
    assert resp.status == 204
    resp = await client.get(f"{base}/t2", headers=MARK)
    assert resp.status == 404


@pytest.mark.parametrize(
    "body",
    [b"{not json", b"[1,2]", b'{"name": 5, "format": "lance"}', b'{"format": "lance"}'],
)
async def test_malformed_create_bodies_are_400(
    make_client: MakeClient, fake_ops: FakeOperations, body: bytes
) -> None:
    client = await make_client()
    resp = await client.post(
        "/v1/warehouses/demo/namespaces/demo_ns/tables", data=body,
        headers={**MARK, "Content-Type": "application/json"},
    )
    assert resp.status == 400
    assert fake_ops.calls["create_table"] == 0


async def test_oversized_body_is_413_envelope(
    make_client: MakeClient, fake_ops: FakeOperations
) -> None:
    client = await make_client(max_body_bytes=2048)
    resp = await client.post(
        "/v1/warehouses/demo/namespaces/demo_ns/tables", data=b"x" * 50_000,
        headers={**MARK, "Content-Type": "application/json"},
    )
    assert resp.status == 413
    assert (await resp.json())["error"]["code"] == 413
    assert fake_ops.calls["create_table"] == 0


async def test_invalidate_table_and_all(
    make_client: MakeClient, fake_ops: FakeOperations, metrics
) -> None:
    client = await make_client()
    resp = await client.post("/v1/cache/invalidate",
                             json={"warehouse": "demo", "namespace": ["demo_ns"],
                                   "table": "orders"}, headers=MARK)
    assert (await resp.json()) == {"invalidated": 1}
    resp = await client.post("/v1/cache/invalidate", json={"all": True}, headers=MARK)
    assert (await resp.json()) == {"invalidated": 3}
    assert count(metrics, "http", "admin", "hit") == 2


async def test_invalidate_by_an_unknown_warehouse_name_is_a_404_not_a_silent_0(
    make_client: MakeClient, fake_ops: FakeOperations
) -> None:
    client = await make_client()
    resp = await client.post("/v1/cache/invalidate",
                             json={"warehouse": "no-such-wh", "namespace": ["demo_ns"],
                                   "table": "orders"}, headers=MARK)
    assert resp.status == 404  # was 200 {"invalidated": 0}
    assert "no-such-wh" in (await resp.json())["error"]["message"]
    assert fake_ops.calls["invalidate"] == 0
    assert fake_ops.calls["resolve_warehouse"] == 1


async def test_resolve_warehouse(make_client: MakeClient) -> None:
    client = await make_client()
    resp = await client.get("/v1/warehouses/demo", headers=MARK)
    assert (await resp.json()) == {"warehouse_id": WAREHOUSE.id, "name": "demo"}


@pytest.mark.parametrize(("rule", "given", "status"), [
    ("demo", "demo", 200), ("demo", WAREHOUSE.id, 200), ("other", "demo", 403),
    ("other", WAREHOUSE.id, 403), (WAREHOUSE.id[:2] + "*", WAREHOUSE.id, 403),
])
async def test_the_native_warehouse_look_up_applies_the_caller_policy(
    make_client: MakeClient, rule: str, given: str, status: int
) -> None:
    """Issue #35 item 6: `/v1/warehouses/{wh}` told any caller any warehouse's id."""
    policy = CallerPolicy(parse_rules({"callers": {"alice": [
        {"warehouse": rule, "namespace": "*", "table": "*", "access": "read"}]}}, "t"))
    client = await make_client(policy=policy,
                               auth=StaticTokenCallerAuth({"tok-alice-123": "alice"}))
    resp = await client.get(f"/v1/warehouses/{given}",
                            headers={"Authorization": "Bearer tok-alice-123"})
    assert resp.status == status
    if status == 200:
        assert (await resp.json())["warehouse_id"] == WAREHOUSE.id


# ---------------------------------------------------------------- hot path: memo and pre-render
async def test_a_rotated_credential_is_served_at_once_on_the_next_request(
    make_client: MakeClient, rotating_ops: RotatingOperations, metrics
) -> None:
    rotating_ops.outcome = Outcome.HIT
    client = await make_client(ops=rotating_ops)

    async def key() -> str:
        resp = await client.get(CREDS, headers=MARK)
        assert resp.status == 200
        doc = await resp.json()
        assert doc["outcome"] == "hit"
        return str(doc["credentials"][0]["config"]["s3.access-key-id"])

    assert await rotating_ops.keys_across_rotation(key) == ROTATED_KEYS
    assert count(metrics, "http", "credential", "hit") == 4
    assert total_requests(metrics) == 4


async def test_remaining_outcome_and_identity_ttl_change_per_request_on_the_same_body(
    make_client: MakeClient, rotating_ops: RotatingOperations, metrics
) -> None:
    client = await make_client(ops=rotating_ops)
    seen = []
    for outcome, lifetime, trust in ((Outcome.MISS, 3600.0, 30.0), (Outcome.HIT, 1234.5, 0.25),
                                     (Outcome.STALE, 400.25, 0.0)):
        rotating_ops.outcome, rotating_ops.lifetime_s = outcome, lifetime
        rotating_ops.identity_ttl_s = trust
        doc = await (await client.get(CREDS, headers=MARK)).json()
        seen.append((doc["outcome"], doc["remaining_s"], doc["identity_ttl_s"]))
    assert seen == [("miss", 3600.0, 30.0), ("hit", 1234.5, 0.25), ("stale", 400.25, 0.0)]
    assert count(metrics, "http", "credential", "stale") == 1


async def test_a_bad_target_is_refused_every_time_and_counted_each_time(
    make_client: MakeClient, metrics
) -> None:
    client = await make_client()
    for _ in range(3):
        resp = await client.get(CREDS + "?access=admin", headers=MARK)
        assert resp.status == 400
    assert count(metrics, "http", "credential", "error") == 3
    # The memoized parse of a GOOD target never leaks to a bad one and vice versa.
    assert (await client.get(CREDS + "?access=write", headers=MARK)).status == 200




async def test_expected_identity_travels_from_the_query_to_the_service(
    make_client: MakeClient, fake_ops: FakeOperations
) -> None:
    client = await make_client()
    for _ in range(2):  # each target twice: its second request reads the match's memo
        resp = await client.get(CREDS, params={"expected_location": "s3://b/wh/t1/",
                                               "table_id": "ABC"}, headers=MARK)
        assert resp.status == 200
        assert "table_id" in await resp.json()
    for _ in range(2):
        resp = await client.get(CREDS, headers=MARK)
        assert resp.status == 200
    expected = ExpectedIdentity(location="s3://b/wh/t1/", table_id="abc")
    assert fake_ops.expects == [expected, expected, None, None]


async def test_identity_mismatch_is_409_with_its_type(
    make_client: MakeClient, fake_ops: FakeOperations
) -> None:
    fake_ops.errors["get_credentials"] = TableIdentityMismatchError("another table")
    client = await make_client()
    resp = await client.get(CREDS, params={"expected_location": "s3://b/old"}, headers=MARK)
    assert resp.status == 409
    assert (await resp.json())["error"]["type"] == "TableIdentityMismatch"


async def test_answers_carrying_credentials_say_no_store(make_client: MakeClient) -> None:
    """Issue #35 finding 7: credential answers carried no Cache-Control, so a proxy or a
    client cache could keep storage keys. The credential answer is the prebuilt one."""
    client = await make_client()
    for _ in range(2):  # a miss, then the cached (memoized body) answer
        resp = await client.get(CREDS, headers=MARK)
        assert resp.status == 200
        assert resp.headers.getall("Cache-Control") == ["no-store"]
    load = "/v1/warehouses/demo/namespaces/demo_ns/tables/orders"
    resp = await client.get(load + "?vended=true", headers=MARK)
    assert resp.headers["Cache-Control"] == "no-store"
    resp = await client.get(load, headers=MARK)  # no credentials in it
    assert "Cache-Control" not in resp.headers
