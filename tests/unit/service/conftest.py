"""Fixtures of the wiring tests: a FakeCatalog with one table, and the Core built on it."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from gateway.metrics import Metrics
from gateway.service import build_core
from gateway.service.wiring import Core
from tests.fakes.catalog import FakeCatalog, FakeIdP
from tests.fakes.clock import FakeClock
from tests.fakes.rng import seeded
from tests.fakes.settings import make_settings
from tests.fakes.tasks import FakeTaskRegistry


@pytest.fixture
def catalog(clock: FakeClock) -> FakeCatalog:
    cat = FakeCatalog(clock, credential_lifetime_s=3600)
    cat.add_table(("ns",), "orders")
    return cat


@pytest.fixture
async def make_core(clock: FakeClock, catalog: FakeCatalog
                    ) -> AsyncIterator[Callable[..., Core]]:
    """`make_core(metrics, **settings)`: a Core on the FakeCatalog (closed after the test)."""
    registry = FakeTaskRegistry()
    cores: list[Core] = []

    def make(metrics: Metrics | None = None, **env: Any) -> Core:
        core = build_core(make_settings(**env), metrics or Metrics(), registry.spawn, clock,
                          transport=catalog.transport(FakeIdP(expires_in=3600, clock=clock)),
                          rng=seeded(2))
        cores.append(core)
        return core

    yield make
    for core in cores:
        await core.close()
    await registry.cancel_all()
