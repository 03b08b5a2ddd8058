"""Unit-level fixtures shared by the daemon tests (surfaces/conftest.py has a richer fake_ops)."""

import io
import logging
from collections.abc import Iterator

import pytest

from gateway.audit import AUDIT_LOGGER
from gateway.logging import Redactor, configure_logging
from tests.unit.surfaces.fake_operations import FakeOperations


@pytest.fixture
def fake_ops() -> FakeOperations:
    """One table, demo/demo_ns/orders, behind the real surfaces."""
    ops = FakeOperations()
    ops.add_table(("demo_ns",), "orders")
    return ops


@pytest.fixture
def audit_stream() -> Iterator[io.StringIO]:
    """JSON log lines at WARNING into a buffer (audit lines pass: their logger is at INFO when
    the test turns them on); the root and audit loggers are restored after."""
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
