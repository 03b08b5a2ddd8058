"""The cloud stores of the local stack: loopback only, and stopped with the stack."""

from __future__ import annotations

import pytest

from devstack.launcher import Stack
from devstack.processes import is_loopback, listen_addresses

pytestmark = pytest.mark.integration


@pytest.mark.parametrize("name", ["azurite", "gcs", "gcs-guard"])
def test_each_cloud_store_listens_on_loopback_only(cloud_stack: Stack, name: str) -> None:
    pid = cloud_stack.info.pids[name]
    addresses = listen_addresses(pid)
    assert addresses, f"{name} listens nowhere"
    assert all(is_loopback(a) for a in addresses), addresses


def test_each_storage_has_its_warehouse(cloud_stack: Stack) -> None:
    info = cloud_stack.info
    names = {s: info.warehouse_for(s).name for s in ("s3", "adls", "gcs")}
    assert names == {"s3": "demo", "adls": "demo_adls", "gcs": "demo_gcs"}
    assert len({info.warehouse_for(s).id for s in names}) == 3
