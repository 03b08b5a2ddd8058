"""SIGTERM drains an in-flight slow request, then the daemon exits 0; settings errors exit 2."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.gateway_process import REPO_ROOT, stack_env, start_gateway

pytestmark = pytest.mark.integration


def test_sigterm_drains_an_in_flight_request_then_exits_0(
    info: dict[str, Any], new_table, emulator, tmp_path: Path
) -> None:
    table = new_table(prefix="drain")
    proc = start_gateway(tmp_path, stack_env(info), name="drain")
    try:
        emulator.set_faults(latency_ms=1500, operations=["load_generic_table_credentials"])
        result: dict[str, Any] = {}

        def call() -> None:
            with httpx.Client(trust_env=False, timeout=30) as c:
                resp = c.get(
                    f"{proc.http_url}/v1/warehouses/demo/namespaces/{table['namespace']}"
                    f"/tables/{table['table']['name']}/credentials",
                    headers={"X-Lakegate-Request": "1"},
                )
                result["status"] = resp.status_code
                result["outcome"] = resp.json().get("outcome")

        worker = threading.Thread(target=call)
        worker.start()
        deadline = time.monotonic() + 10
        while emulator.stats().get("load_generic_table_credentials", 0) == 0:
            assert time.monotonic() < deadline, "the request never reached the catalog"
            time.sleep(0.05)
        os.kill(proc.pid, signal.SIGTERM)  # while the upstream call is still sleeping
        worker.join(timeout=30)
        assert result == {"status": 200, "outcome": "miss"}
        assert proc.wait(30) == 0
        assert "stop requested; draining" in proc.log_text()
    finally:
        proc.stop()


def test_invalid_settings_exit_2_with_the_env_var_named(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("LAKEGATE")}
    env |= {"LAKEGATE__UPSTREAM__URL": "ftp://nope", "LAKEGATE__TOKEN__KIND": "none",
            "LAKEGATE__LISTEN__HOST": "0.0.0.0"}  # noqa: S104 - refused
    done = subprocess.run([sys.executable, "-m", "gateway", "serve"], cwd=REPO_ROOT, env=env,
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 2
    assert "LAKEGATE__UPSTREAM__URL" in done.stderr
