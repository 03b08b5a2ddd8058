"""Unit-level fixtures shared by the daemon tests (surfaces/conftest.py has a richer fake_ops)."""

import pytest

from tests.unit.surfaces.fake_operations import FakeOperations


@pytest.fixture
def fake_ops() -> FakeOperations:
    """One table, demo/demo_ns/orders, behind the real surfaces."""
    ops = FakeOperations()
    ops.add_table(("demo_ns",), "orders")
    return ops
