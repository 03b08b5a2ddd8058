"""Every process of the local stack binds loopback only (read from the sockets, not settings)."""

from __future__ import annotations

from typing import Any

import pytest

from devstack.processes import is_loopback, listen_addresses

pytestmark = pytest.mark.integration


def test_loopback_predicate() -> None:
    assert all(map(is_loopback, ["127.0.0.1", "127.3.4.5", "::1", "::ffff:127.0.0.1"]))
    assert not any(map(is_loopback, ["0.0.0.0", "::", "192.0.2.2", "::ffff:10.0.0.1"]))  # noqa: S104


def test_every_stack_process_listens_on_loopback_only(devstack: Any) -> None:
    pids = devstack.info.pids
    assert {"idp", "s3", "catalog"} <= set(pids)
    for name, pid in pids.items():
        addresses = listen_addresses(pid)
        assert addresses, f"{name} listens on nothing?"
        assert all(map(is_loopback, addresses)), f"{name} binds {sorted(addresses)}"
