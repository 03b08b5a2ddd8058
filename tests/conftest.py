"""Shared fixtures. The local-stack fixtures live in tests/stack_fixtures.py.

`clock`, `registry` and `metrics` are used by most unit modules; defining them once here keeps
every module on the same fake time, task registry and metric set.
"""

from collections.abc import AsyncIterator

import pytest

from gateway.metrics import Metrics
from tests.fakes.clock import FakeClock
from tests.fakes.tasks import FakeTaskRegistry

pytest_plugins = ["tests.stack_fixtures"]


@pytest.fixture
def clock() -> FakeClock:
    """A fresh fake clock: tests move time explicitly, never sleep."""
    return FakeClock()


@pytest.fixture
async def registry() -> AsyncIterator[FakeTaskRegistry]:
    """A task registry whose leftover tasks are cancelled at teardown."""
    reg = FakeTaskRegistry()
    yield reg
    await reg.cancel_all()


@pytest.fixture
def metrics() -> Metrics:
    """A fresh metric set (its own prometheus registry), so counters start at zero."""
    return Metrics()
