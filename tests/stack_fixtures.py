"""Local-stack pytest fixtures.

- `devstack` (session): the full stack of docs/contracts.md §2 in a temporary directory with free
  ports; with the gateway once `gateway.app` is importable (a gateway that does not become
  ready fails the fixture with the tail of its log).
- `bare_stack` (session): the same stack without the gateway (IdP, SeaweedFS, emulator only).
- `emulator` (function): `EmulatorHooks` for the `devstack` catalog; faults are cleared and
  counters reset before and faults cleared after each test.
- `idp_stats` (function): `IdpHooks` for the `devstack` IdP, counter reset before each test.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from devstack.gateway_proc import gateway_available
from devstack.hooks import EmulatorHooks, IdpHooks
from devstack.launcher import Stack, start_stack, stop_stack


def clean_emulator(stack: Stack) -> Iterator[EmulatorHooks]:
    """The stack's emulator hooks with counters reset and no faults, and no faults left after."""
    hooks = EmulatorHooks(stack.info.catalog.url)
    hooks.clear_faults()
    hooks.reset()
    yield hooks
    hooks.clear_faults()


def _started(run_dir: Path, *, with_gateway: bool) -> Iterator[Stack]:
    stack = start_stack(run_dir, with_gateway=with_gateway)
    try:
        yield stack
    finally:
        stop_stack(run_dir)


@pytest.fixture(scope="session")
def devstack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    """The running local stack (with the gateway when it exists)."""
    yield from _started(tmp_path_factory.mktemp("devstack"), with_gateway=gateway_available())


@pytest.fixture(scope="session")
def bare_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    """IdP + SeaweedFS + catalog emulator, no gateway."""
    yield from _started(tmp_path_factory.mktemp("barestack"), with_gateway=False)


@pytest.fixture
def emulator(devstack: Stack) -> Iterator[EmulatorHooks]:
    yield from clean_emulator(devstack)


@pytest.fixture
def idp_stats(devstack: Stack) -> IdpHooks:
    hooks = IdpHooks(devstack.info.idp.issuer)
    hooks.reset()
    return hooks


# Short windows make refresh-ahead observable on credentials of ~10 s (a SAS honours them; STS's
# 900 s minimum never allowed that on S3).
CLOUD_GATEWAY_ENV = {
    "LAKEGATE__CACHE__MIN_REMAINING_S": "2",
    "LAKEGATE__CACHE__REFRESH_LEAD_S": "6",
}


@pytest.fixture(scope="session")
def cloud_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    """The stack with Azurite (`demo_adls`) and fake-gcs-server behind its token-checking
    layer (`demo_gcs`) beside SeaweedFS, and its gateway."""
    run_dir = tmp_path_factory.mktemp("cloudstack")
    stack = start_stack(
        run_dir, with_gateway=True, storages=("s3", "adls", "gcs"), gateway_env=CLOUD_GATEWAY_ENV
    )
    try:
        yield stack
    finally:
        stop_stack(run_dir)
