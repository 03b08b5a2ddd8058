"""Audit lines: the fields, independence from LOG__LEVEL, and LOG__AUDIT=false."""

from __future__ import annotations

import asyncio
import io
import json
import logging
from collections.abc import Iterator

import pytest

from gateway.audit import AUDIT_LOGGER, configure_audit, credential_event
from gateway.errors import PermissionDeniedError
from gateway.logging import Redactor, configure_logging
from gateway.metrics import Metrics
from gateway.models import AccessMode, CallerIdentity, RequestContext
from gateway.settings import Settings
from gateway.surfaces.callers import StaticTokenCallerAuth
from gateway.surfaces.ingress import Gate
from gateway.surfaces.policy import CallerPolicy, parse_rules
from tests.unit.surfaces.fake_operations import FakeOperations

CTX = RequestContext(request_id="req-1")
ALICE = CallerIdentity("alice", True)


@pytest.fixture
def stream() -> Iterator[io.StringIO]:
    root = logging.getLogger()
    before = (list(root.handlers), root.level, logging.getLogger(AUDIT_LOGGER).level)
    buf = io.StringIO()
    configure_logging("WARNING", "json", Redactor(), stream=buf)
    yield buf
    handlers, level, audit_level = before
    for h in list(root.handlers):
        root.removeHandler(h)
    for h in handlers:
        root.addHandler(h)
    root.setLevel(level)
    logging.getLogger(AUDIT_LOGGER).setLevel(audit_level)


def test_audit_line_fields_even_when_the_log_level_is_warning(stream: io.StringIO) -> None:
    configure_audit(True)
    credential_event(CTX, ALICE, ("demo", ("a", "b"), "orders"), AccessMode.WRITE, "miss")
    (line,) = stream.getvalue().splitlines()
    doc = json.loads(line)
    assert doc["logger"] == AUDIT_LOGGER
    fields = ("caller", "warehouse", "namespace", "table", "access", "outcome")
    assert {k: doc[k] for k in fields} == {
        "caller": "alice", "warehouse": "demo", "namespace": "a.b", "table": "orders",
        "access": "write", "outcome": "miss",
    }
    assert doc["request_id"] == "req-1"


def test_audit_can_be_turned_off(stream: io.StringIO) -> None:
    configure_audit(False)
    credential_event(CTX, None, ("demo", ("a",), "t"), AccessMode.READ, "hit")
    assert stream.getvalue() == ""


def test_audit_setting_defaults_on_and_parses() -> None:
    base = {"LAKEGATE__UPSTREAM__URL": "http://127.0.0.1:1", "LAKEGATE__TOKEN__KIND": "none"}
    assert Settings.load(environ=base).log.audit is True
    assert Settings.load(environ=base | {"LAKEGATE__LOG__AUDIT": "false"}).log.audit is False


async def test_a_policy_refusal_writes_a_denied_line_without_the_callers_token(
    stream: io.StringIO,
) -> None:
    configure_audit(True)
    secret = "s3cr3t-caller-token-value"  # noqa: S105 - a test token
    policy = CallerPolicy(parse_rules({"callers": {"alice": [
        {"warehouse": "demo", "namespace": "*", "table": "*", "access": "read"}]}}, "t"))
    gate = Gate(StaticTokenCallerAuth({secret: "alice"}), policy, None, FakeOperations(), Metrics())
    caller = await gate.admit(f"Bearer {secret}", {"Authorization": f"Bearer {secret}",
                                                   "Host": "localhost"})
    await gate.authorize(caller, CTX, ("demo", ("a", "b"), "orders"), AccessMode.READ)
    assert stream.getvalue() == ""  # a grant is audited by the service, not the gate
    with pytest.raises(PermissionDeniedError):
        await gate.authorize(caller, CTX, ("demo", ("a", "b"), "orders"), AccessMode.WRITE)
    (line,) = stream.getvalue().splitlines()
    doc = json.loads(line)
    fields = ("logger", "caller", "warehouse", "namespace", "table", "access", "outcome")
    assert {k: doc[k] for k in fields} == {
        "logger": AUDIT_LOGGER, "caller": "alice", "warehouse": "demo", "namespace": "a.b",
        "table": "orders", "access": "write", "outcome": "denied",
    }
    assert doc["request_id"] == "req-1"
    assert secret not in line


async def test_coalesced_lines_follow_the_answer_in_order(stream: io.StringIO) -> None:
    configure_audit(True)
    credential_event(CTX, ALICE, ("demo", ("a",), "t"), AccessMode.READ, "miss")
    for _ in range(2):
        credential_event(CTX, ALICE, ("demo", ("a",), "t"), AccessMode.READ, "coalesced",
                         defer=True)
    # the miss is written before its answer leaves; the coalesced waiters are answered first
    assert [json.loads(x)["outcome"] for x in stream.getvalue().splitlines()] == ["miss"]
    await asyncio.sleep(0)
    assert [json.loads(x)["outcome"] for x in stream.getvalue().splitlines()] == [
        "miss", "coalesced", "coalesced",
    ]
