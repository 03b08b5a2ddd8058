"""The gate: anti-SSRF, rate limit per caller, policy refusals counted by reason."""

from __future__ import annotations

import pytest

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
    check_not_forged({}, require_marker=False)
    check_not_forged({"X-Lakegate-Request": "1"}, require_marker=True)
    with pytest.raises(PermissionDeniedError):
        check_not_forged({}, require_marker=True)


def test_the_refusal_of_a_request_without_authorization_names_the_fix() -> None:
    """What a user of an engine (DuckDB's AUTHORIZATION_TYPE 'none', curl) reads in the 403."""
    with pytest.raises(PermissionDeniedError) as info:
        check_not_forged({}, require_marker=True)
    message = str(info.value)
    assert "any bearer token" in message
    assert "'X-Lakegate-Request: 1'" in message
    check_not_forged({"Authorization": "Bearer anything"}, require_marker=True)  # the fix works


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


async def test_policy_checked_against_warehouse_id_after_resolution(
    fake_ops: FakeOperations, metrics: Metrics, clock: FakeClock
) -> None:
    gate, caller = await alice_on_team_a(fake_ops, metrics, clock, WAREHOUSE.id)
    ctx = RequestContext(request_id="r")
    await gate.authorize(caller, ctx, ("demo", ("team_a",), "t"), AccessMode.READ)
    assert fake_ops.calls["resolve_warehouse"] == 1
    with pytest.raises(PermissionDeniedError):
        await gate.authorize(caller, ctx, ("demo", ("team_b",), "t"), AccessMode.READ)
    assert rejected(metrics, "policy") == 1


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
