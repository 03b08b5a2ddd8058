"""The gate's synchronous hot path (`Gate.admit_now`, `Gate.authorize_now`): the same checks and
answers as the awaited `admit` / `authorize`, or None / False to say "await them"."""

from __future__ import annotations

import pytest

from gateway.audit import TableNotes
from gateway.errors import PermissionDeniedError, RateLimitedCallerError
from gateway.metrics import Metrics
from gateway.models import AccessMode, RequestContext
from gateway.surfaces.callers import ANONYMOUS, StaticTokenCallerAuth
from gateway.surfaces.peers import AuthFailures
from gateway.surfaces.policy import CallerPolicy, parse_rules
from tests.unit.surfaces.conftest import build_gate
from tests.unit.surfaces.fake_operations import FakeClock, FakeOperations

MARK = {"Host": "127.0.0.1", "X-Lakegate-Request": "1"}
TEAM_A = ("demo", ("team_a",), "t")


def rejected(metrics: Metrics, reason: str) -> float | None:
    return metrics.registry.get_sample_value("lakegate_ingress_rejected_total", {"reason": reason})


async def test_mode_none_is_admitted_at_once_and_a_forgeable_request_is_refused_as_by_admit(
    fake_ops: FakeOperations, metrics: Metrics, clock: FakeClock
) -> None:
    gate = build_gate(fake_ops, metrics, clock)
    assert gate.admit_now(None, MARK) == await gate.admit(None, MARK) == ANONYMOUS
    with pytest.raises(PermissionDeniedError):
        gate.admit_now(None, {"Host": "127.0.0.1"})  # no marker
    with pytest.raises(PermissionDeniedError):
        gate.admit_now(None, {**MARK, "Origin": "http://evil.example"})
    assert rejected(metrics, "ssrf_header") == 2


async def test_a_known_static_token_is_admitted_at_once_an_unknown_one_is_left_to_admit(
    fake_ops: FakeOperations, metrics: Metrics, clock: FakeClock
) -> None:
    gate = build_gate(fake_ops, metrics, clock, auth=StaticTokenCallerAuth({"tok-a": "alice"}))
    caller = gate.admit_now("Bearer tok-a", MARK)
    assert caller is not None
    assert caller == await gate.admit("Bearer tok-a", MARK)
    assert caller.name == "alice"
    assert gate.admit_now("Bearer nope", MARK) is None  # `admit` refuses it (401)
    assert gate.admit_now(None, MARK) is None
    assert not rejected(metrics, "auth")  # nothing refused without `admit`


async def test_after_a_failed_authentication_every_request_takes_the_awaited_path(
    fake_ops: FakeOperations, metrics: Metrics, clock: FakeClock
) -> None:
    failures = AuthFailures(1.0, 5, clock)
    gate = build_gate(fake_ops, metrics, clock, auth=StaticTokenCallerAuth({"tok-a": "alice"}),
                      failures=failures)
    assert gate.admit_now("Bearer tok-a", MARK) is not None
    failures.failed("k", None)
    assert failures.active
    assert gate.admit_now("Bearer tok-a", MARK) is None  # the failure limits apply in `admit`
    failures.forget_credentials()
    assert not failures.active
    failures.failed(None, "peer")
    failures.forget_credentials()
    assert failures.active  # a peer's failures outlive a reload


async def test_the_rate_limit_takes_a_token_on_the_synchronous_path_too(
    fake_ops: FakeOperations, metrics: Metrics, clock: FakeClock
) -> None:
    gate = build_gate(fake_ops, metrics, clock, rate=(1.0, 2))
    assert gate.admit_now(None, MARK) is not None
    assert await gate.admit(None, MARK) is not None
    with pytest.raises(RateLimitedCallerError):
        gate.admit_now(None, MARK)
    assert rejected(metrics, "ratelimit") == 1


async def test_without_a_policy_it_is_allowed_at_once_and_the_table_is_noted(
    fake_ops: FakeOperations, metrics: Metrics, clock: FakeClock
) -> None:
    gate = build_gate(fake_ops, metrics, clock)
    ctx = RequestContext(request_id="r")
    notes = TableNotes()
    try:
        assert gate.authorize_now(ANONYMOUS, ctx, TEAM_A, AccessMode.READ)
    finally:
        notes.close()
    assert notes.tables == [(ctx, ANONYMOUS, TEAM_A, AccessMode.READ)]


async def test_with_a_policy_only_a_remembered_allow_is_decided_at_once(
    fake_ops: FakeOperations, metrics: Metrics, clock: FakeClock
) -> None:
    policy = CallerPolicy(parse_rules({"callers": {"alice": [
        {"warehouse": "demo", "namespace": "team_a", "table": "*"}]}}, "t"))
    gate = build_gate(fake_ops, metrics, clock, policy=policy,
                      auth=StaticTokenCallerAuth({"tok-a": "alice"}))
    alice = await gate.admit("Bearer tok-a")
    ctx = RequestContext(request_id="r")
    team_b = ("demo", ("team_b",), "t")
    notes = TableNotes()
    try:
        assert not gate.authorize_now(alice, ctx, TEAM_A, AccessMode.READ)  # not decided yet
        assert notes.tables == []  # `authorize` notes it when it decides
        await gate.authorize(alice, ctx, TEAM_A, AccessMode.READ)
        assert gate.authorize_now(alice, ctx, TEAM_A, AccessMode.READ)
        with pytest.raises(PermissionDeniedError):
            await gate.authorize(alice, ctx, team_b, AccessMode.READ)
        assert not gate.authorize_now(alice, ctx, team_b, AccessMode.READ)  # a deny: awaited
        assert not gate.authorize_now(alice, ctx, TEAM_A, AccessMode.WRITE)
    finally:
        notes.close()
    assert rejected(metrics, "policy") == 1
