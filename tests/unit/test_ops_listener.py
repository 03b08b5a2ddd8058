"""The ops listener: probes and /metrics on their own port, never credentials."""

from __future__ import annotations

import json
from pathlib import Path

import aiohttp
import pytest

from tests.unit.app_harness import CREDS, MARK, app_for, running, settings_for
from tests.unit.surfaces.fake_operations import FakeOperations


async def test_ops_port_serves_probes_and_metrics_but_no_credentials(
    tmp_path: Path, fake_ops: FakeOperations
) -> None:
    settings = settings_for(tmp_path, LAKEGATE__LISTEN__OPS_PORT="0")
    async with running(app_for(settings, fake_ops)) as app:
        assert app.ops_port
        assert app.ops_port not in {app.http_port, app.grpc_port}
        ports = json.loads((tmp_path / "ports.json").read_text())
        assert ports["ops_port"] == app.ops_port
        ops = f"http://127.0.0.1:{app.ops_port}"
        async with aiohttp.ClientSession() as session:
            for path in ("/livez", "/readyz"):
                async with session.get(ops + path) as resp:
                    assert resp.status == 200, path
            async with session.get(ops + "/metrics") as resp:
                assert resp.status == 200
                assert "lakegate_requests_total" in await resp.text()
            async with session.get(ops + CREDS, headers=MARK) as resp:
                assert resp.status == 404
            # The credential listener still answers credentials.
            async with session.get(f"http://127.0.0.1:{app.http_port}{CREDS}", headers=MARK) as r:
                assert r.status == 200
    async with aiohttp.ClientSession() as session:
        with pytest.raises(aiohttp.ClientConnectionError):
            await session.get(f"http://127.0.0.1:{app.ops_port}/livez")


async def test_no_ops_listener_unless_configured(
    tmp_path: Path, fake_ops: FakeOperations
) -> None:
    async with running(app_for(settings_for(tmp_path), fake_ops)) as app:
        assert app.ops_port is None
        assert "ops_port" not in json.loads((tmp_path / "ports.json").read_text())
