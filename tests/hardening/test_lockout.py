"""The lockout measurement's arithmetic and verdict (hardening/lockout.py, hardening/report.py)."""

from __future__ import annotations

import json
from pathlib import Path

from hardening.lockout import _p99, _pooled
from hardening.report import HardeningReport, render_markdown, write_report


def _measurement(quiet_p99: float, flooded_p99: float, flooded_errors: int) -> dict[str, object]:
    quiet = {"requests": 100, "errors": 0, "error_rate": 0.0, "p50_ms": 0.3, "p99_ms": quiet_p99}
    flooded = {"requests": 100, "errors": flooded_errors, "error_rate": flooded_errors / 100,
               "p50_ms": 0.3, "p99_ms": flooded_p99}
    ok = flooded_errors == 0 and flooded_p99 <= 2 * quiet_p99
    return {"surface": "grpc_uds", "quiet": quiet, "flooded": flooded, "ok": ok,
            "attacker": {"threads": 32, "sent": 500, "per_s": 90.0,
                         "statuses": {"401": 50, "429": 450}}}


def test_windows_pool_into_one_p99_and_error_rate() -> None:
    windows = [{"latencies": [0.001] * 99 + [0.05], "errors": 0},
               {"latencies": [0.001] * 100, "errors": 3}]
    pooled = _pooled(windows)
    assert pooled["requests"] == 200
    assert pooled["errors"] == 3
    assert pooled["error_rate"] == 0.015
    assert pooled["p50_ms"] == 1.0
    assert _p99(sorted([float(i) for i in range(100)])) == 99.0


def test_a_hurt_victim_fails_the_run_and_every_figure_is_reported(tmp_path: Path) -> None:
    fine = HardeningReport()
    fine.isolation.lockout_measured(_measurement(10.0, 15.0, 0))
    assert fine.passed
    assert "lockout grpc_uds: victim p99 10.0 ms quiet, 15.0 ms" in render_markdown(fine)
    _, summary = write_report(fine, tmp_path)
    assert json.loads(summary.read_text())["isolation"]["lockout"][0]["ok"] is True
    for hurt in (_measurement(10.0, 25.0, 0), _measurement(10.0, 10.0, 1)):
        report = HardeningReport()
        report.isolation.lockout_measured(hurt)
        assert not report.passed
        assert "[lockout:grpc_uds]" in render_markdown(report)
