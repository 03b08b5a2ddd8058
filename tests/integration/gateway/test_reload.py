"""SIGHUP on a real daemon: tokens and policy reload, a broken file keeps the last good set."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.gateway_process import stack_env, start_gateway

pytestmark = pytest.mark.integration

GRANT = "    - {warehouse: demo, namespace: '*', table: '*'}\n"


def _wait_for_log(proc: Any, text: str, count: int, timeout_s: float = 15.0) -> None:
    deadline = time.monotonic() + timeout_s
    while proc.log_text().count(text) < count:
        assert time.monotonic() < deadline, f"no {count}x {text!r} in the log"
        assert proc.alive(), "the gateway exited"
        time.sleep(0.05)


def test_sighup_reloads_tokens_and_policy_and_keeps_the_last_good_set(
    info: dict[str, Any], new_table, tmp_path: Path
) -> None:
    table = new_table(prefix="reload")
    tokens, policy = tmp_path / "tokens.yaml", tmp_path / "policy.yaml"
    tokens.write_text('"reload-token-a": alice\n')
    policy.write_text("callers:\n  alice:\n" + GRANT)
    env = stack_env(info) | {
        "LAKEGATE__CALLERS__MODE": "token",
        "LAKEGATE__CALLERS__TOKENS_FILE": str(tokens),
        "LAKEGATE__CALLERS__POLICY_FILE": str(policy),
    }
    proc = start_gateway(tmp_path, env, name="reload")
    path = (
        f"/v1/warehouses/demo/namespaces/{table['namespace']}/tables/"
        f"{table['table']['name']}/credentials"
    )
    try:
        # One keep-alive connection for the whole test: a reload must not drop it.
        with httpx.Client(base_url=proc.http_url, trust_env=False, timeout=30) as c:

            def status(token: str) -> int:
                return c.get(path, headers={"Authorization": f"Bearer {token}"}).status_code

            assert status("reload-token-a") == 200
            tokens.write_text('"reload-token-a": alice\n"reload-token-b": bob\n')
            policy.write_text("callers:\n  bob:\n" + GRANT)
            os.kill(proc.pid, signal.SIGHUP)
            _wait_for_log(proc, "configuration reloaded", 1)
            assert status("reload-token-b") == 200
            assert status("reload-token-a") == 403  # alice's grant is gone

            tokens.write_text("- broken\n")  # not a token -> name mapping
            os.kill(proc.pid, signal.SIGHUP)
            _wait_for_log(proc, "reload failed", 1)
            assert status("reload-token-b") == 200  # the last good set is still live
            assert status("reload-token-a") == 403
            metrics = c.get("/metrics").text
            assert 'lakegate_config_reloads_total{result="error"} 1.0' in metrics
            assert 'lakegate_config_reloads_total{result="ok"} 1.0' in metrics
            assert "process_resident_memory_bytes" in metrics
        os.kill(proc.pid, signal.SIGTERM)  # SIGTERM still drains and exits 0
        assert proc.wait(30) == 0
        log = proc.log_text()
        assert "reload-token-b" not in log
        assert "broken" not in log
    finally:
        proc.stop()
