"""devstack.gateway_process against a real `python -m gateway serve` (upstream unreachable:
only the process lifecycle is under test, so /livez is the readiness it waits for)."""

from __future__ import annotations

import signal
from pathlib import Path

import httpx
import pytest

from devstack.gateway_process import GatewayProcess, GatewayStartError

REPO_ROOT = Path(__file__).resolve().parents[3]
SETTINGS = {
    "LAKEGATE__UPSTREAM__URL": "http://127.0.0.1:9",
    "LAKEGATE__TOKEN__KIND": "none",
    "LAKEGATE__SHUTDOWN_GRACE_S": "2",
}


def test_start_stop_restart_on_the_same_ports_and_exit_codes(tmp_path: Path) -> None:
    gw = GatewayProcess(tmp_path, SETTINGS, name="gw", repo_root=REPO_ROOT)
    try:
        first = gw.start(ready=False)
        assert httpx.get(first.http_url + "/livez", timeout=5, trust_env=False).status_code == 200
        assert gw.http_uds == tmp_path / "gw-http.sock"
        assert gw.alive()
        assert gw.stop() == 0  # SIGTERM: drained and exited cleanly
        assert not gw.alive()
        second = gw.start(ready=False)
        assert second == first  # pinned: clients reconnect where they were
        gw.kill9()
        assert gw.start(ready=False) == first
        gw.signal(signal.SIGTERM)
        assert gw.wait(20) == 0
        assert gw.stop() == 0  # already ended: the collected code, no second signal
    finally:
        gw.stop()
    logs = sorted(p.name for p in (tmp_path / "logs").glob("gw*.log"))
    assert logs == ["gw-2.log", "gw-3.log", "gw.log"]
    # Every start's log, oldest first: three starts, two clean stops (the kill -9 logs none).
    text = gw.log_text()
    assert text.count('"lakegate listening"') == 3
    assert text.count('"lakegate stopped"') == 2


def test_a_gateway_that_exits_at_start_is_reported_with_its_log_tail(tmp_path: Path) -> None:
    bad = {**SETTINGS, "LAKEGATE__LISTEN__HTTP_PORT": "not-a-port"}
    gw = GatewayProcess(tmp_path, bad, name="bad", repo_root=REPO_ROOT)
    named = "LAKEGATE__LISTEN__HTTP_PORT: Input should be a valid integer"
    with pytest.raises(GatewayStartError, match=named):
        gw.start(timeout_s=30, ready=False)
    assert not gw.alive()
