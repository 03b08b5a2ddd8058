"""`python -m devstack up|down` lifecycle: readiness time, refusal of a second up, restart of one
component, and no process or listener left behind."""

from __future__ import annotations

import glob
import json
import subprocess
import sys
import time
from pathlib import Path

import httpx
import psutil
import pytest

from devstack.errors import StackRunningError
from devstack.launcher import start_component, start_stack, stop_component, stop_stack
from devstack.stack_info import StackInfo

pytestmark = pytest.mark.integration

REQUIRED_KEYS = (
    "idp.issuer",
    "idp.token_url",
    "idp.jwks_uri",
    "idp.audience",
    "s3.endpoint",
    "s3.region",
    "s3.bucket",
    "s3.admin_access_key",
    "s3.admin_secret_key",
    "catalog.url",
    "catalog.roles.read",
    "catalog.roles.write",
    "warehouse.id",
    "warehouse.name",
    "namespace",
    "pids",
    "run_dir",
)


def _lookup(info: dict, dotted: str):
    node = info
    for part in dotted.split("."):
        node = node[part]
    return node


def _listening_pids_and_ports(pids: set[int]) -> set[tuple[int, int]]:
    found = set()
    for conn in psutil.net_connections(kind="inet"):
        if conn.status == psutil.CONN_LISTEN and conn.pid in pids:
            found.add((conn.pid, conn.laddr.port))
    return found


def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "devstack", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_up_is_ready_fast_and_down_leaves_nothing_behind(tmp_path):
    run_dir = tmp_path / "stack"
    start = time.monotonic()
    stack = start_stack(run_dir, with_gateway=False)
    try:
        elapsed = time.monotonic() - start
        assert elapsed < 15, f"up took {elapsed:.1f}s"
        raw = json.loads((run_dir / "stack.json").read_text())
        info = stack.info
        assert raw == info.model_dump(mode="json")  # the file is the typed info, key for key
        for key in REQUIRED_KEYS:
            assert _lookup(raw, key) not in (None, ""), key
        for name in ("gateway", "alice", "bob", "direct"):
            assert info.idp.clients[name].secret
        assert (info.warehouse.name, info.namespace) == ("demo", "demo_ns")
        pids = set(info.pids.values())
        assert len(pids) == 4  # idp, s3, nats, catalog
        assert info.nats is not None
        assert info.nats.url.startswith("nats://127.0.0.1:")
        children = {c.pid for p in pids for c in psutil.Process(p).children(recursive=True)}
        assert _listening_pids_and_ports(pids | children)
        with pytest.raises(StackRunningError, match="already running"):
            start_stack(run_dir, with_gateway=False)
        patterns = json.loads((run_dir / "pids.json").read_text())["tmp_sockets"]
        assert any(glob.glob(p) for p in patterns)  # weed's hard-coded /tmp sockets
    finally:
        stopped = stop_stack(run_dir)
    assert set(stopped) == {"idp", "s3", "nats", "catalog"}
    assert not any(
        psutil.pid_exists(p) and psutil.Process(p).status() != psutil.STATUS_ZOMBIE
        for p in pids | children
    )
    assert not _listening_pids_and_ports(pids | children)
    ports = [
        int(info.catalog.url.rsplit(":", 1)[1]),
        int(info.s3.endpoint.rsplit(":", 1)[1]),
        int(info.nats.url.rsplit(":", 1)[1]),
    ]
    busy = {
        c.laddr.port for c in psutil.net_connections(kind="inet") if c.status == psutil.CONN_LISTEN
    }
    assert not busy.intersection(ports)
    assert not (run_dir / "pids.json").exists()
    assert not [s for p in patterns for s in glob.glob(p)]
    assert stop_stack(run_dir) == []  # idempotent


def test_cli_refuses_a_second_up_and_down_stops_everything(tmp_path):
    up = _cli("up", "--no-gateway", "--no-auth", "--soft-delete", cwd=tmp_path)
    assert up.returncode == 0, up.stderr
    assert "local stack up" in up.stdout
    info = StackInfo.load(tmp_path / ".devstack")
    try:
        wh = httpx.get(
            f"{info.catalog.url}/management/v1/warehouse/{info.warehouse.id}"
        )
        assert wh.status_code == 200  # --no-auth: no token needed
        assert wh.json()["delete-profile"]["type"] == "soft"
        assert "secret" not in json.dumps(wh.json()).lower()
        again = _cli("up", "--no-gateway", cwd=tmp_path)
        assert again.returncode == 1
        assert "already running" in again.stderr
        assert "lakegate-devstack down" in again.stderr  # the real command
    finally:
        down = _cli("down", cwd=tmp_path)
    assert down.returncode == 0
    assert not [
        p
        for p in info.pids.values()
        if psutil.pid_exists(p) and psutil.Process(p).status() != psutil.STATUS_ZOMBIE
    ]


def test_catalog_restart_keeps_tables_and_idp_restart_keeps_tokens_valid(tmp_path):
    stack = start_stack(tmp_path / "s", with_gateway=False)
    try:
        info = stack.info
        c = info.idp.clients["alice"]
        token = httpx.post(
            info.idp.token_url,
            data={"grant_type": "client_credentials"},
            auth=(c.id, c.secret),
        ).json()["access_token"]
        headers = {"Authorization": f"Bearer {token}"}
        tables = (
            f"{info.catalog.url}/lakekeeper/v1/{info.warehouse.id}"
            f"/namespaces/{info.namespace}/generic-tables"
        )
        assert (
            httpx.post(
                tables, json={"name": "survivor", "format": "lance"}, headers=headers
            ).status_code
            == 200
        )
        old_pid = info.pids["catalog"]
        stop_component(tmp_path / "s", "catalog")
        with pytest.raises(httpx.ConnectError):
            httpx.get(tables, headers=headers)
        new_pid = start_component(tmp_path / "s", "catalog")
        assert new_pid != old_pid
        stop_component(tmp_path / "s", "idp")
        start_component(tmp_path / "s", "idp")
        assert httpx.get(f"{tables}/survivor", headers=headers).status_code == 200
    finally:
        stop_stack(tmp_path / "s")
    assert not psutil.pid_exists(new_pid) or psutil.Process(new_pid).status() == "zombie"


def test_a_port_taken_between_choice_and_bind_is_retried_with_fresh_ports(tmp_path, monkeypatch):
    import socket

    import devstack.launcher as launcher_module

    squatter = socket.socket()
    squatter.bind(("127.0.0.1", 0))
    squatter.listen()
    taken = squatter.getsockname()[1]
    calls: list[int] = []
    real_free_ports = launcher_module.free_ports

    def first_call_collides(count: int) -> list[int]:
        ports = real_free_ports(count)
        calls.append(count)
        if len(calls) == 1:
            ports[1] = taken  # the catalog's port
        return ports

    monkeypatch.setattr(launcher_module, "free_ports", first_call_collides)
    try:
        stack = start_stack(tmp_path / "s", with_gateway=False)
        assert len(calls) == 2
        assert not stack.info.catalog.url.endswith(f":{taken}")
    finally:
        stop_stack(tmp_path / "s")
        squatter.close()


def test_the_stack_gateway_restarts_as_a_component_with_its_settings(tmp_path):
    stack = start_stack(tmp_path / "s", with_gateway=True)
    try:
        info = stack.info
        assert info.gateway is not None
        ready = f"{info.gateway_url}/readyz"
        assert httpx.get(ready, timeout=10).status_code == 200
        assert (tmp_path / "s" / "logs" / "gateway.log").exists()
        stop_component(tmp_path / "s", "gateway")
        with pytest.raises(httpx.ConnectError):
            httpx.get(ready, timeout=5)
        new_pid = start_component(tmp_path / "s", "gateway")  # same ports, same settings
        assert new_pid != info.pids["gateway"]
        assert httpx.get(ready, timeout=10).status_code == 200  # logged in to the IdP again
        assert StackInfo.load(tmp_path / "s").pids["gateway"] == new_pid
    finally:
        stop_stack(tmp_path / "s")
