"""Fixtures the ADLS and GCS storage tests share."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from devstack.hooks import EmulatorHooks
from devstack.launcher import Stack


@pytest.fixture
def hooks(cloud_stack: Stack) -> Iterator[EmulatorHooks]:
    """The cloud stack's emulator with no faults and its credential cache (Lakekeeper's STC)
    empty, and no faults left after."""
    hooks = EmulatorHooks(cloud_stack.info.catalog.url)
    hooks.clear_faults()
    hooks.clear_credential_cache()
    yield hooks
    hooks.clear_faults()
