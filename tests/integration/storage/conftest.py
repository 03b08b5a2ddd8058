"""Fixtures the ADLS and GCS storage tests share."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from devstack.hooks import EmulatorHooks
from devstack.launcher import Stack
from lakegate_client import Client


@pytest.fixture
def hooks(cloud_stack: Stack) -> Iterator[EmulatorHooks]:
    """The cloud stack's emulator with no faults and its credential cache (Lakekeeper's STC)
    empty, and no faults left after."""
    hooks = EmulatorHooks(cloud_stack.info.catalog.url)
    hooks.clear_faults()
    hooks.clear_credential_cache()
    yield hooks
    hooks.clear_faults()


@pytest.fixture
def adls_client(cloud_stack: Stack, monkeypatch: pytest.MonkeyPatch) -> Iterator[Client]:
    """A client of the cloud stack's gateway for the ADLS warehouse (its storage calls reach
    Azurite through the environment: Lakekeeper vends no endpoint)."""
    assert cloud_stack.info.azure is not None
    monkeypatch.setenv("LAKEGATE_ADLS_ENDPOINT", cloud_stack.info.azure.blob_endpoint)
    with Client(f"unix:{cloud_stack.info.gateway.uds}", warehouse="demo_adls") as c:
        yield c
