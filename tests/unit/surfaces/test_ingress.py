"""The gate: anti-SSRF, rate limit per caller, policy refusals counted by reason."""

from __future__ import annotations

import io
import json
import logging

import pytest

from gateway.audit import configure_audit
from gateway.errors import PermissionDeniedError, RateLimitedCallerError
from gateway.metrics import Metrics
from gateway.models import AccessMode, CallerIdentity, RequestContext
from gateway.surfaces.callers import StaticTokenCallerAuth
from gateway.surfaces.ingress import Gate, RateLimiter, check_not_forged
from gateway.surfaces.policy import CallerPolicy, parse_rules
from tests.unit.surfaces.conftest import MakeClient, build_gate
from tests.unit.surfaces.fake_operations import WAREHOUSE, FakeClock, FakeOperations


def rejected(metrics: Metrics, reason: str) -> float | None:
    return metrics.registry.get_sample_value("lakegate_ingress_rejected_total", {"reason": reason})


async def alice_on_team_a(
    ops: FakeOperations, metrics: Metrics, clock: FakeClock, warehouse: str
) -> tuple[Gate, CallerIdentity]:
    """A gate whose policy lets alice (token auth) use namespace team_a of `warehouse` only."""
    policy = CallerPolicy(parse_rules({"callers": {"alice": [
        {"warehouse": warehouse, "namespace": "team_a", "table": "*"}]}}, "t"))
    gate = build_gate(ops, metrics, clock, policy=policy,
                      auth=StaticTokenCallerAuth({"tok-alice-123": "alice"}))
    return gate, await gate.admit("Bearer tok-alice-123")


def test_marker_or_authorization_required_only_when_asked() -> None:
    host = {"Host": "127.0.0.1:8765"}
    check_not_forged(host, require_marker=False)
    check_not_forged({**host, "X-Lakegate-Request": "1"}, require_marker=True)
    with pytest.raises(PermissionDeniedError):
        check_not_forged(host, require_marker=True)


def test_the_refusal_of_a_request_without_authorization_names_the_fix() -> None:
    """What a user of an engine (DuckDB's AUTHORIZATION_TYPE 'none', curl) reads in the 403."""
    with pytest.raises(PermissionDeniedError) as info:
        check_not_forged({"Host": "localhost"}, require_marker=True)
    message = str(info.value)
    assert "any bearer token" in message
    assert "'X-Lakegate-Request: 1'" in message
    check_not_forged({"Host": "localhost", "Authorization": "Bearer anything"},
                     require_marker=True)  # the fix works


def test_rate_limiter_refills_with_time(clock: FakeClock) -> None:
    limiter = RateLimiter(2.0, 2, clock)
    limiter.acquire("a")
    limiter.acquire("a")
    with pytest.raises(RateLimitedCallerError) as info:
        limiter.acquire("a")
    assert info.value.retry_after_s == pytest.approx(0.5)
    limiter.acquire("b")  # buckets are per caller
    clock.advance(0.5)
    limiter.acquire("a")


async def test_rate_limited_caller_gets_429_with_retry_after(
    make_client: MakeClient, metrics: Metrics
) -> None:
    client = await make_client(rate=(1.0, 1))
    path = "/v1/warehouses/demo/namespaces/demo_ns/tables/orders/credentials"
    first = await client.get(path, headers={"X-Lakegate-Request": "1"})
    second = await client.get(path, headers={"X-Lakegate-Request": "1"})
    assert first.status == 200
    assert second.status == 429
    assert second.headers["Retry-After"] == "1"
    assert rejected(metrics, "ratelimit") == 1


async def test_a_uuid_is_decided_on_through_the_name_it_resolves_to(
    fake_ops: FakeOperations, metrics: Metrics, clock: FakeClock
) -> None:
    gate, caller = await alice_on_team_a(fake_ops, metrics, clock, "demo")
    ctx = RequestContext(request_id="r")
    await gate.authorize(caller, ctx, (WAREHOUSE.id, ("team_a",), "t"), AccessMode.READ)
    assert fake_ops.calls["resolve_warehouse"] == 1
    with pytest.raises(PermissionDeniedError):
        await gate.authorize(caller, ctx, (WAREHOUSE.id, ("team_b",), "t"), AccessMode.READ)
    assert rejected(metrics, "policy") == 1


@pytest.mark.parametrize("pattern", [WAREHOUSE.id, WAREHOUSE.id[:1] + "*", "*-*"])
async def test_warehouse_patterns_never_match_the_uuid_itself(
    fake_ops: FakeOperations, metrics: Metrics, clock: FakeClock, pattern: str
) -> None:
    """Issue #35 finding 5: a rule on `d*` admitted warehouse `prod_a` through its UUID,
    which starts with `d`. Here the UUID starts with `0`, its name is `demo`."""
    gate, caller = await alice_on_team_a(fake_ops, metrics, clock, pattern)
    ctx = RequestContext(request_id="r")
    for given in (WAREHOUSE.id, "demo"):
        assert not await gate.allowed(caller, ctx, (given, ("team_a",), "t"), AccessMode.READ)


async def test_policy_decisions_are_memoized_but_name_dependent_ones_resolve_every_time(
    fake_ops: FakeOperations, metrics: Metrics, clock: FakeClock
) -> None:
    gate, caller = await alice_on_team_a(fake_ops, metrics, clock, "demo")
    ctx = RequestContext(request_id="r")
    for _ in range(3):
        assert await gate.allowed(caller, ctx, ("demo", ("team_a",), "t"), AccessMode.READ)
        assert not await gate.allowed(caller, ctx, ("demo", ("team_b",), "t"), AccessMode.READ)
        assert not await gate.allowed(caller, ctx, ("demo", ("team_a",), "t"), AccessMode.WRITE)
    assert fake_ops.calls["resolve_warehouse"] == 0
    # Given by UUID, the decision depends on the warehouse's resolved name: never memoized.
    for _ in range(3):
        assert await gate.allowed(caller, ctx, (WAREHOUSE.id, ("team_a",), "t"), AccessMode.READ)
    assert fake_ops.calls["resolve_warehouse"] == 3
    # A different caller with the same request is decided for itself.
    bob = await build_gate(fake_ops, metrics, clock).admit(None)
    assert not await gate.allowed(bob, ctx, ("demo", ("team_a",), "t"), AccessMode.READ)


async def test_the_decision_memo_stays_bounded(
    fake_ops: FakeOperations, metrics: Metrics, clock: FakeClock
) -> None:
    from gateway.surfaces.ingress import DECISION_MEMO_SIZE

    policy = CallerPolicy(parse_rules({"callers": {"*": [
        {"warehouse": "demo", "namespace": "*", "table": "t1*"}]}}, "t"))
    gate = build_gate(fake_ops, metrics, clock, policy=policy)
    caller = await gate.admit(None)
    ctx = RequestContext(request_id="r")
    for i in range(DECISION_MEMO_SIZE + 50):
        allowed = await gate.allowed(caller, ctx, ("demo", ("ns",), f"t{i}"), AccessMode.READ)
        assert allowed == str(i).startswith("1")
    assert len(gate._decisions) == DECISION_MEMO_SIZE


# ---- projects (issue #28, finding 2) -----------------------------------------------------------

TEAM_A_IN_DEFAULT = {"callers": {
    "alice": [{"warehouse": "demo", "namespace": "team_a*", "table": "*"}],
    "carol": [{"project": "p2", "warehouse": "demo", "namespace": "team_a*", "table": "*"}],
}}
CRED_PATH = "/v1/warehouses/demo/namespaces/team_a/tables/sales/credentials"
TOKENS = {"tok-alice-123": "alice", "tok-carol-123": "carol"}


def team_a_policy(default_project: str = "p1") -> CallerPolicy:
    return CallerPolicy(parse_rules(TEAM_A_IN_DEFAULT, "t"), default_project)


@pytest.mark.parametrize("header", ["x-project-id", "x-project-ident"])
async def test_a_project_header_naming_another_project_is_refused_when_the_project_is_fixed(
    make_client: MakeClient, metrics: Metrics, header: str
) -> None:
    """The issue's leak: alice, limited to demo/team_a*, sent another project's id and got that
    project's demo/team_a tables. With the project fixed (the default), any other is 403."""
    policy = CallerPolicy(parse_rules({"callers": {"alice": TEAM_A_IN_DEFAULT["callers"]["alice"]}},
                                      "t"))  # no default project configured: Lakekeeper's
    client = await make_client(policy=policy, auth=StaticTokenCallerAuth(TOKENS))
    alice = {"Authorization": "Bearer tok-alice-123"}
    assert (await client.get(CRED_PATH, headers=alice)).status == 200
    for path in (CRED_PATH, "/v1/warehouses/demo/namespaces/team_a/tables"):
        resp = await client.get(path, headers={**alice, header: "p2"})
        assert resp.status == 403
        assert (await resp.json())["error"]["type"] == "ProjectNotAllowed"
    assert rejected(metrics, "project") == 2


async def test_a_fixed_project_is_enforced_without_a_policy_too(make_client: MakeClient) -> None:
    client = await make_client(policy=CallerPolicy(None, "p1"))
    resp = await client.get(CRED_PATH, headers={**AUTH_MARK, "x-project-id": "p2"})
    assert resp.status == 403


AUTH_MARK = {"X-Lakegate-Request": "1"}


async def test_with_project_headers_allowed_the_policy_must_grant_the_project(
    make_client: MakeClient,
) -> None:
    client = await make_client(policy=team_a_policy(), auth=StaticTokenCallerAuth(TOKENS),
                               allow_project_header=True)
    alice = {"Authorization": "Bearer tok-alice-123"}
    carol = {"Authorization": "Bearer tok-carol-123"}
    # alice's rules hold in the default project only; carol's in p2 only
    assert (await client.get(CRED_PATH, headers=alice)).status == 200
    assert (await client.get(CRED_PATH, headers={**alice, "x-project-id": "p2"})).status == 403
    assert (await client.get(CRED_PATH, headers={**carol, "x-project-id": "p2"})).status == 200
    assert (await client.get(CRED_PATH, headers=carol)).status == 403
    assert (await client.get(CRED_PATH, headers={**carol, "x-project-id": "p3"})).status == 403


async def test_project_is_part_of_the_decision(
    fake_ops: FakeOperations, metrics: Metrics, clock: FakeClock
) -> None:
    """A decision memoized in one project is not reused in another."""
    gate = build_gate(fake_ops, metrics, clock, policy=team_a_policy(),
                      auth=StaticTokenCallerAuth(TOKENS), allow_project_header=True)
    alice = await gate.admit("Bearer tok-alice-123")
    scope = ("demo", ("team_a",), "sales")
    assert await gate.allowed(alice, RequestContext(request_id="r"), scope, AccessMode.READ)
    assert not await gate.allowed(alice, RequestContext(request_id="r", project_id="p2"), scope,
                                  AccessMode.READ)


async def test_grpc_refuses_another_project(server_factory) -> None:  # type: ignore[no-untyped-def]
    import grpc

    from lakegate.v1 import common_pb2, credentials_pb2

    server = await server_factory(policy=CallerPolicy(parse_rules({"callers": {
        "anonymous": TEAM_A_IN_DEFAULT["callers"]["alice"]}}, "t"), "p1"))
    req = credentials_pb2.GetTableCredentialsRequest(table=common_pb2.TableRef(
        warehouse="demo", namespace=["team_a"], name="sales"))
    await server.creds.GetTableCredentials(req, timeout=5)
    with pytest.raises(grpc.aio.AioRpcError) as info:
        await server.creds.GetTableCredentials(req, metadata=(("x-project-id", "p2"),), timeout=5)
    assert info.value.code() is grpc.StatusCode.PERMISSION_DENIED


# ---- Host and Sec-Fetch-Site (issue #28, finding 3) ---------------------------------------------

@pytest.mark.parametrize("headers", [
    {"Host": "rebind.evil.example:8765"},  # DNS rebinding
    {"Host": "169.254.169.254"},
    {"Sec-Fetch-Site": "same-site"},
    {"Sec-Fetch-Site": "same-origin"},  # what a rebound page's own requests say
    {"Sec-Fetch-Site": "cross-site"},
])
async def test_rebinding_hosts_and_page_requests_get_no_credentials(
    make_client: MakeClient, metrics: Metrics, headers: dict[str, str]
) -> None:
    client = await make_client()
    resp = await client.get(CRED_PATH, headers={**AUTH_MARK, **headers})
    assert resp.status == 403
    assert (await resp.json())["error"]["type"] == "ForgeableRequest"
    assert rejected(metrics, "ssrf_header") == 1


async def test_loopback_hosts_and_a_typed_address_are_served(make_client: MakeClient) -> None:
    client = await make_client()
    for headers in ({"Host": "localhost"}, {"Host": "[::1]:8765"}, {"Sec-Fetch-Site": "none"}):
        assert (await client.get(CRED_PATH, headers={**AUTH_MARK, **headers})).status == 200


async def test_configured_names_are_served(
    fake_ops: FakeOperations, metrics: Metrics, clock: FakeClock
) -> None:
    from gateway.surfaces.hosts import HostAllowList

    gate = build_gate(fake_ops, metrics, clock)
    gate.hosts = HostAllowList(["lakegate-local.lakegate.svc.cluster.local"])
    await gate.admit(None, {"Host": "lakegate-local.lakegate.svc.cluster.local:8765",
                            **AUTH_MARK})
    with pytest.raises(PermissionDeniedError):
        await gate.admit(None, {"Host": "other.svc.cluster.local:8765", **AUTH_MARK})


async def test_ops_endpoints_answer_a_pod_ip_host(make_client: MakeClient) -> None:
    """kubelet and Prometheus ask by pod IP; those endpoints carry no credentials."""
    client = await make_client()
    for path in ("/livez", "/readyz", "/metrics"):
        assert (await client.get(path, headers={"Host": "10.1.2.3:9465"})).status == 200


# ---- the served project (issue #35, finding 6) ------------------------------------------------

NIL_PROJECT = "00000000-0000-0000-0000-000000000000"


@pytest.mark.parametrize("header", ["x-project-id", "x-project-ident"])
async def test_a_header_naming_the_catalogs_default_project_is_the_served_project(
    make_client: MakeClient, fake_ops: FakeOperations, header: str
) -> None:
    """The issue: pylakekeeper's own tests send the NIL UUID (Lakekeeper's default project),
    and a gateway without UPSTREAM__PROJECT_ID, which serves exactly that project, said 403."""
    policy = CallerPolicy(parse_rules({"callers": {"alice": TEAM_A_IN_DEFAULT["callers"]["alice"]}},
                                      "t"))  # no UPSTREAM__PROJECT_ID
    client = await make_client(policy=policy, auth=StaticTokenCallerAuth(TOKENS))
    alice = {"Authorization": "Bearer tok-alice-123"}
    for path in (CRED_PATH, "/v1/warehouses/demo/namespaces/team_a/tables"):
        resp = await client.get(path, headers={**alice, header: NIL_PROJECT})
        assert resp.status == 200, await resp.text()
    # ...and it is the project of a request naming none: the header is not passed on
    assert (await client.get("/v1/warehouses/demo/namespaces/team_b/tables/x/credentials",
                             headers={**alice, header: NIL_PROJECT})).status == 403


async def test_the_configured_project_in_any_case_is_the_served_project(
    make_client: MakeClient,
) -> None:
    served = "6f1c2a34-0b5e-4d7a-9c11-2e3f4a5b6c7d"
    client = await make_client(policy=CallerPolicy(None, served))
    for value in (served, served.upper()):
        resp = await client.get(CRED_PATH, headers={**AUTH_MARK, "x-project-id": value})
        assert resp.status == 200
    # the NIL UUID is another project once one is configured
    resp = await client.get(CRED_PATH, headers={**AUTH_MARK, "x-project-id": NIL_PROJECT})
    assert resp.status == 403


async def test_grpc_serves_the_default_project_by_its_nil_uuid(server_factory) -> None:  # type: ignore[no-untyped-def]
    from lakegate.v1 import common_pb2, credentials_pb2

    server = await server_factory(policy=CallerPolicy(parse_rules({"callers": {
        "anonymous": TEAM_A_IN_DEFAULT["callers"]["alice"]}}, "t")))
    req = credentials_pb2.GetTableCredentialsRequest(table=common_pb2.TableRef(
        warehouse="demo", namespace=["team_a"], name="sales"))
    resp = await server.creds.GetTableCredentials(
        req, metadata=(("x-project-id", NIL_PROJECT),), timeout=5)
    assert resp.warehouse_id


async def test_a_project_refusal_is_audited_with_the_caller_and_the_folded_table(
    make_client: MakeClient, audit_stream: io.StringIO,
) -> None:
    """Issue #35 finding 7: a ProjectNotAllowed refusal wrote no audit line, and its log line
    named neither caller nor table."""
    configure_audit(True)
    ingress_log = logging.getLogger("lakegate.ingress")
    level = ingress_log.level
    ingress_log.setLevel(logging.INFO)
    try:
        client = await make_client(policy=CallerPolicy(None, "p1"),
                                   auth=StaticTokenCallerAuth(TOKENS))
        resp = await client.get(
            "/v1/warehouses/Demo/namespaces/TEAM_A/tables/Sales/credentials",
            headers={"Authorization": "Bearer tok-alice-123", "x-project-id": "p2"})
    finally:
        ingress_log.setLevel(level)
    assert resp.status == 403
    docs = [json.loads(x) for x in audit_stream.getvalue().splitlines()]
    (audit,) = [d for d in docs if d.get("audit") == "credential"]
    assert {k: audit[k] for k in ("caller", "warehouse", "namespace", "table", "outcome")} == {
        "caller": "alice", "warehouse": "demo", "namespace": "team_a", "table": "sales",
        "outcome": "ProjectNotAllowed"}
    (refused,) = [d for d in docs if d.get("msg") == "request refused"]
    assert {k: refused[k] for k in ("caller", "project", "warehouse", "namespace", "table")} == {
        "caller": "alice", "project": "p2", "warehouse": "demo", "namespace": "team_a",
        "table": "sales"}
    assert "tok-alice-123" not in audit_stream.getvalue()


async def test_a_grpc_project_refusal_is_audited_with_the_folded_table(
    server_factory, audit_stream: io.StringIO,  # type: ignore[no-untyped-def]
) -> None:
    import grpc

    from lakegate.v1 import catalog_pb2, common_pb2, credentials_pb2

    configure_audit(True)
    server = await server_factory(policy=CallerPolicy(None, "p1"))
    md = (("x-project-id", "p2"),)
    req = credentials_pb2.GetTableCredentialsRequest(table=common_pb2.TableRef(
        warehouse="Demo", namespace=["TEAM_A"], name="Sales"))
    with pytest.raises(grpc.aio.AioRpcError):
        await server.creds.GetTableCredentials(req, metadata=md, timeout=5)
    with pytest.raises(grpc.aio.AioRpcError):
        await server.catalog.ListTables(catalog_pb2.ListTablesRequest(
            warehouse="Demo", namespace=["TEAM_A"]), metadata=md, timeout=5)
    docs = [json.loads(x) for x in audit_stream.getvalue().splitlines()]
    assert [(d["warehouse"], d["namespace"], d["table"], d["outcome"], d["surface"])
            for d in docs if d.get("audit") == "credential"] == [
        ("demo", "team_a", "sales", "ProjectNotAllowed", "grpc"),
        ("demo", "team_a", None, "ProjectNotAllowed", "grpc")]
