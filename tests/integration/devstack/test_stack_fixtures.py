"""The shared fixtures other tests build on: `devstack`, `emulator`, `idp_stats`."""

from __future__ import annotations

import httpx
import pytest

from devstack.gateway_proc import gateway_available

pytestmark = pytest.mark.integration


def test_devstack_fixture_runs_the_stack_and_the_gateway_when_it_exists(devstack):
    info = devstack.info
    assert httpx.get(f"{info.catalog.url}/health").status_code == 200
    if gateway_available():
        assert info.gateway_url.startswith("http://127.0.0.1:")
        assert httpx.get(f"{info.gateway_url}/readyz").status_code == 200
    else:
        assert info.gateway is None


def test_emulator_and_idp_stats_fixtures_count_exactly(devstack, emulator, idp_stats):
    assert emulator.stats()["config"] == 0
    assert idp_stats.token_requests() == 0
    c = devstack.info.idp.clients["direct"]
    token = httpx.post(
        devstack.info.idp.token_url,
        data={"grant_type": "client_credentials"},
        auth=(c.id, c.secret),
    ).json()["access_token"]
    resp = httpx.get(
        f"{emulator.url}/catalog/v1/config",
        params={"warehouse": "demo"},
        headers={"Authorization": f"Bearer {token}"},
    )
    assert resp.status_code == 200
    assert emulator.stats()["config"] == 1
    assert idp_stats.token_requests() == 1
    emulator.set_faults(status=503, count=1, operations=["config"])
    assert emulator.faults()["remaining"] == 1
