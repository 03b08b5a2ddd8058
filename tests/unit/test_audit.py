"""Audit lines: the fields, independence from LOG__LEVEL, and LOG__AUDIT=false."""

from __future__ import annotations

import asyncio
import io
import json

import pytest

from gateway.audit import AUDIT_LOGGER, AuditTrail, configure_audit, credential_event
from gateway.errors import PermissionDeniedError
from gateway.metrics import Metrics
from gateway.models import AccessMode, CallerIdentity, RequestContext
from gateway.settings import Settings, SettingsError
from gateway.surfaces.callers import StaticTokenCallerAuth
from gateway.surfaces.ingress import Gate
from gateway.surfaces.policy import CallerPolicy, parse_rules
from gateway.tasks import TaskRegistry
from tests.fakes.clock import FakeClock
from tests.unit.surfaces.fake_operations import FakeOperations

CTX = RequestContext(request_id="req-1")
ALICE = CallerIdentity("alice", True)


def test_audit_line_fields_even_when_the_log_level_is_warning(audit_stream: io.StringIO) -> None:
    configure_audit(True)
    credential_event(CTX, ALICE, ("demo", ("a", "b"), "orders"), AccessMode.WRITE, "miss")
    (line,) = audit_stream.getvalue().splitlines()
    doc = json.loads(line)
    assert doc["logger"] == AUDIT_LOGGER
    fields = ("caller", "warehouse", "namespace", "table", "access", "outcome")
    assert {k: doc[k] for k in fields} == {
        "caller": "alice", "warehouse": "demo", "namespace": "a.b", "table": "orders",
        "access": "write", "outcome": "miss",
    }
    assert doc["request_id"] == "req-1"


def test_audit_can_be_turned_off(audit_stream: io.StringIO) -> None:
    configure_audit(False)
    credential_event(CTX, None, ("demo", ("a",), "t"), AccessMode.READ, "hit")
    assert audit_stream.getvalue() == ""


def test_audit_setting_defaults_on_and_parses() -> None:
    base = {"LAKEGATE__UPSTREAM__URL": "http://127.0.0.1:1", "LAKEGATE__TOKEN__KIND": "none"}
    assert Settings.load(environ=base).log.audit is True
    assert Settings.load(environ=base | {"LAKEGATE__LOG__AUDIT": "false"}).log.audit is False


async def test_a_policy_refusal_writes_a_denied_line_without_the_callers_token(
    audit_stream: io.StringIO,
) -> None:
    configure_audit(True)
    secret = "s3cr3t-caller-token-value"  # noqa: S105 - a test token
    policy = CallerPolicy(parse_rules({"callers": {"alice": [
        {"warehouse": "demo", "namespace": "*", "table": "*", "access": "read"}]}}, "t"))
    gate = Gate(StaticTokenCallerAuth({secret: "alice"}), policy, None, FakeOperations(), Metrics())
    caller = await gate.admit(f"Bearer {secret}", {"Authorization": f"Bearer {secret}",
                                                   "Host": "localhost"})
    await gate.authorize(caller, CTX, ("demo", ("a", "b"), "orders"), AccessMode.READ)
    assert audit_stream.getvalue() == ""  # a grant is audited by the service, not the gate
    with pytest.raises(PermissionDeniedError):
        await gate.authorize(caller, CTX, ("demo", ("a", "b"), "orders"), AccessMode.WRITE)
    (line,) = audit_stream.getvalue().splitlines()
    doc = json.loads(line)
    fields = ("logger", "caller", "warehouse", "namespace", "table", "access", "outcome")
    assert {k: doc[k] for k in fields} == {
        "logger": AUDIT_LOGGER, "caller": "alice", "warehouse": "demo", "namespace": "a.b",
        "table": "orders", "access": "write", "outcome": "denied",
    }
    assert doc["request_id"] == "req-1"
    assert secret not in line


async def test_coalesced_lines_follow_the_answer_in_order(audit_stream: io.StringIO) -> None:
    configure_audit(True)
    credential_event(CTX, ALICE, ("demo", ("a",), "t"), AccessMode.READ, "miss")
    for _ in range(2):
        credential_event(CTX, ALICE, ("demo", ("a",), "t"), AccessMode.READ, "coalesced",
                         defer=True)
    # the miss is written before its answer leaves; the coalesced waiters are answered first
    assert [json.loads(x)["outcome"] for x in audit_stream.getvalue().splitlines()] == ["miss"]
    await asyncio.sleep(0)
    assert [json.loads(x)["outcome"] for x in audit_stream.getvalue().splitlines()] == [
        "miss", "coalesced", "coalesced",
    ]


def _trail_ctx(caller: CallerIdentity | None = ALICE, surface: str = "http") -> RequestContext:
    return RequestContext(request_id="req-2", caller=caller, surface=surface)


def test_read_hits_fold_into_one_counted_line_with_first_and_last_time(
    audit_stream: io.StringIO,
) -> None:
    configure_audit(True)
    clock = FakeClock()
    trail = AuditTrail(clock, 10.0)
    table = ("demo", ("a", "b"), "orders")
    for _ in range(3):
        trail.credential(_trail_ctx(), table, AccessMode.READ, "hit")
        clock.advance(1.5)
    trail.credential(_trail_ctx(surface="grpc"), table, AccessMode.READ, "hit")
    trail.credential(_trail_ctx(), table, AccessMode.READ, "coalesced")
    assert audit_stream.getvalue() == ""  # folded: nothing written until the flush
    assert trail.pending == 5
    assert trail.flush() == 5
    docs = [json.loads(x) for x in audit_stream.getvalue().splitlines()]
    by = {(d["surface"], d["outcome"]): d for d in docs}
    assert set(by) == {("http", "hit"), ("grpc", "hit"), ("http", "coalesced")}
    hit = by[("http", "hit")]
    assert {k: hit[k] for k in ("caller", "warehouse", "namespace", "table", "access", "count",
                                "first_ts", "last_ts", "request_id")} == {
        "caller": "alice", "warehouse": "demo", "namespace": "a.b", "table": "orders",
        "access": "read", "count": 3, "first_ts": "2027-01-15T08:00:00.000+00:00",
        "last_ts": "2027-01-15T08:00:03.000+00:00", "request_id": None,
    }
    assert trail.pending == 0
    assert trail.flush() == 0


def test_misses_errors_stale_and_every_write_grant_stay_one_line_each(
    audit_stream: io.StringIO,
) -> None:
    configure_audit(True)
    trail = AuditTrail(FakeClock(), 10.0)
    table = ("demo", ("a",), "t")
    trail.credential(_trail_ctx(), table, AccessMode.READ, "miss")
    trail.credential(_trail_ctx(), table, AccessMode.READ, "stale")
    trail.credential(_trail_ctx(), table, AccessMode.READ, "NotFoundError")
    for outcome in ("hit", "coalesced", "miss"):
        trail.credential(_trail_ctx(), table, AccessMode.WRITE, outcome)
    docs = [json.loads(x) for x in audit_stream.getvalue().splitlines()]
    assert [(d["access"], d["outcome"]) for d in docs] == [
        ("read", "miss"), ("read", "stale"), ("read", "NotFoundError"),
        ("write", "hit"), ("write", "coalesced"), ("write", "miss"),
    ]
    assert all("count" not in d and d["request_id"] == "req-2" for d in docs)
    assert {d["surface"] for d in docs} == {"http"}
    assert trail.pending == 0


def test_interval_zero_writes_one_line_per_request(audit_stream: io.StringIO) -> None:
    configure_audit(True)
    trail = AuditTrail(FakeClock(), 0.0)
    for _ in range(3):
        trail.credential(_trail_ctx(), ("demo", ("a",), "t"), AccessMode.READ, "hit")
    docs = [json.loads(x) for x in audit_stream.getvalue().splitlines()]
    assert [(d["outcome"], "count" in d) for d in docs] == [("hit", False)] * 3


def test_the_fold_flushes_early_at_its_key_bound(audit_stream: io.StringIO) -> None:
    configure_audit(True)
    trail = AuditTrail(FakeClock(), 10.0, max_keys=2)
    for name in ("t1", "t2", "t3"):
        trail.credential(_trail_ctx(), ("demo", ("a",), name), AccessMode.READ, "hit")
    assert [json.loads(x)["table"] for x in audit_stream.getvalue().splitlines()] == ["t1", "t2"]
    assert trail.pending == 1


def test_audit_off_folds_nothing(audit_stream: io.StringIO) -> None:
    configure_audit(False)
    trail = AuditTrail(FakeClock(), 10.0)
    trail.credential(_trail_ctx(), ("demo", ("a",), "t"), AccessMode.READ, "hit")
    assert trail.pending == 0
    assert trail.flush() == 0
    assert audit_stream.getvalue() == ""


async def test_the_owned_task_flushes_every_interval_and_close_flushes_the_rest(
    audit_stream: io.StringIO,
) -> None:
    configure_audit(True)
    clock, registry = FakeClock(), TaskRegistry()
    trail = AuditTrail(clock, 10.0, registry.spawn)
    trail.start()
    trail.start()  # idempotent
    assert len(registry) == 1
    table = ("demo", ("a",), "t")
    trail.credential(_trail_ctx(), table, AccessMode.READ, "hit")
    await clock.settle()  # the task is asleep on the clock
    await clock.run_for(10.0, step=10.0)
    assert [json.loads(x)["count"] for x in audit_stream.getvalue().splitlines()] == [1]
    trail.credential(_trail_ctx(), table, AccessMode.READ, "hit")
    trail.credential(_trail_ctx(), table, AccessMode.READ, "hit")
    await trail.close()
    assert [json.loads(x)["count"] for x in audit_stream.getvalue().splitlines()] == [1, 2]
    assert len(registry) == 0


def test_audit_interval_setting_defaults_to_10_s_and_is_validated() -> None:
    base = {"LAKEGATE__UPSTREAM__URL": "http://127.0.0.1:1", "LAKEGATE__TOKEN__KIND": "none"}
    assert Settings.load(environ=base).log.audit_interval_s == 10.0
    assert Settings.load(
        environ=base | {"LAKEGATE__LOG__AUDIT_INTERVAL_S": "0"}).log.audit_interval_s == 0.0
    with pytest.raises(SettingsError, match="LAKEGATE__LOG__AUDIT_INTERVAL_S"):
        Settings.load(environ=base | {"LAKEGATE__LOG__AUDIT_INTERVAL_S": "-1"})


def test_audit_lines_name_tables_in_the_folded_form(audit_stream: io.StringIO) -> None:
    """Issue #35 finding 7: lines spelt names as sent, so `STRASSE` and `straße` were two
    tables to an operator, one to the policy and the cache."""
    configure_audit(True)
    credential_event(CTX, ALICE, ("Demo", ("Team_A", "\uff33ub"), "STRASSE"), AccessMode.WRITE,
                     "miss")
    doc = json.loads(audit_stream.getvalue())
    assert (doc["warehouse"], doc["namespace"], doc["table"]) == ("demo", "team_a.sub", "strasse")


def test_folded_hits_of_every_spelling_of_a_table_are_one_line(
    audit_stream: io.StringIO,
) -> None:
    configure_audit(True)
    trail = AuditTrail(FakeClock(), 10.0)
    for table in ("straße", "STRASSE", "strasse"):
        trail.credential(_trail_ctx(), ("demo", ("a",), table), AccessMode.READ, "hit")
    assert trail.flush() == 3
    (doc,) = [json.loads(x) for x in audit_stream.getvalue().splitlines()]
    assert (doc["table"], doc["count"]) == ("strasse", 3)
