"""A real App (real listeners, real surfaces) over FakeOperations, for the daemon-level tests.

Why one module: the lifecycle, ops listener, reload, server-log and startup-metrics tests all
start the same App on free ports in a temporary directory; they differ only in settings.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from pathlib import Path

from gateway.app import App
from gateway.settings import Settings
from tests.unit.surfaces.fake_operations import FakeOperations

MARK = {"X-Lakegate-Request": "1"}
CREDS = "/v1/warehouses/demo/namespaces/demo_ns/tables/orders/credentials"


def settings_for(tmp_path: Path, **extra: str) -> Settings:
    """Free TCP ports, both sockets and the ports file under `tmp_path`; `extra` overrides."""
    env = {
        "LAKEGATE__UPSTREAM__URL": "http://127.0.0.1:9",
        "LAKEGATE__TOKEN__KIND": "none",
        "LAKEGATE__LISTEN__HTTP_PORT": "0",
        "LAKEGATE__LISTEN__GRPC_PORT": "0",
        "LAKEGATE__LISTEN__HTTP_UDS": str(tmp_path / "http.sock"),
        "LAKEGATE__LISTEN__GRPC_UDS": str(tmp_path / "grpc.sock"),
        "LAKEGATE__LISTEN__PORTS_FILE": str(tmp_path / "ports.json"),
        "LAKEGATE__SHUTDOWN_GRACE_S": "5",
        **extra,
    }
    return Settings.load(environ=env)


def app_for(settings: Settings, ops: FakeOperations) -> App:
    return App(settings, service_factory=lambda s, m, spawn: ops)  # type: ignore[arg-type,return-value]


@contextlib.asynccontextmanager
async def running(app: App) -> AsyncIterator[App]:
    """Start `app`, and shut it down (drain, close) however the block ends."""
    await app.start()
    try:
        yield app
    finally:
        await app.shutdown()
