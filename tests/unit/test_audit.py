"""Audit lines: the fields, independence from LOG__LEVEL, and LOG__AUDIT=false."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator

import pytest

from gateway.audit import AUDIT_LOGGER, configure_audit, credential_event
from gateway.logging import Redactor, configure_logging
from gateway.models import AccessMode, CallerIdentity, RequestContext
from gateway.settings import Settings

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
