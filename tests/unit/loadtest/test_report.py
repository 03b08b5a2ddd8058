"""Report generation from a fixture summary (loadtest/report.py and loadtest/targets.py)."""

from __future__ import annotations

import json
from pathlib import Path

from loadtest.report import console_summary, write_report

FIXTURE = Path(__file__).with_name("summary_fixture.json")


def _summary() -> dict:
    return json.loads(FIXTURE.read_text())


def test_report_writes_summary_markdown_and_plots(tmp_path: Path) -> None:
    write_report(_summary(), tmp_path)
    written = json.loads((tmp_path / "summary.json").read_text())
    assert written["cold_herd"]["10000"]["upstream_calls"] == 1
    assert written["surfaces"]["http_uds"]["ratio"] == 0.857
    assert written["executors"]["amplification"] == 2307.7
    assert {"name", "target", "measured", "met"} <= set(written["targets"][0])
    for png in ("throughput.png", "latency.png", "amplification.png", "cold_herd.png",
                "scaling.png"):
        assert (tmp_path / png).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    md = (tmp_path / "report.md").read_text()
    assert "| http_uds | 12,000 | 14,000 | 0.857 | 0.9 |" in md
    assert "| http_uds | 64 | 0.95 [0.94-0.96] (5) | 12,000 | 14,000 |" in md
    assert "![throughput.png](throughput.png)" in md
    assert "| gateway | 120,000 | 52 | 62 | 0 | 1.24 | 1 |" in md
    assert "| direct_memo | 90,000 | 9,100 | 9000 | - | 180.0 | 400 |" in md  # no count kept
    assert "direct_memo / gateway: **145.2 x**" in md
    assert "(`LOG__AUDIT=false`), same run: http_uds 24,000 req/s vs baseline 48,000 = 0.5 x." in md
    assert ("(`LOG__AUDIT_INTERVAL_S=0`), same run: http_uds 9,000 req/s vs baseline 45,000 = "
            "0.2 x.") in md
    assert ("- `profile-http_uds.txt` (http_uds, 1200 samples at 11,000 req/s): self: "
            "Runner.run (runners.py) 20.5%, HttpPipeline.dispatch (http_pipeline.py) 6.8%") in md
    # (identity checks, per node, table, hour) are empty: the fixture predates them
    assert "| gateway | 4 | 1,000 | 104 | 1.3 |  |  | 0 | 0 | 1,000,000 |" in md
    assert "| direct_memo | 1 | 1,000 | 21000 | 1050.0 |  |  | 1000 | 0 | 500,000 |" in md


def test_missed_targets_are_stated_plainly_with_the_measured_figure(tmp_path: Path) -> None:
    write_report(_summary(), tmp_path)
    md = (tmp_path / "report.md").read_text()
    assert "Missed targets, plainly:" in md
    assert ("cold herd p99 extra latency at K=10,000 measured 812.5 ms (bound 750.0 ms)"
            in md)
    assert ("cold herd p99 extra latency at every K measured K=1: 1.2 ms (bound 5.0 ms), "
            "K=10000: 812.5 ms (bound 750.0 ms)") in md
    assert "| 10,000 | 1 | 1 | 55.0 | 400.0 | 867.5 | 812.5 | 500.0 | 750.0 | 0 |" in md
    assert "c=1: 0.67 [0.66-0.67] x5; c=64: 0.60 [0.59-0.61] x5" in md


def test_failed_scenario_is_reported_as_not_measured(tmp_path: Path) -> None:
    checks = write_report(_summary(), tmp_path)
    outage = [c for c in checks if c.name == "outage"]
    assert outage
    assert outage[0].met is None
    assert (
        "Scenario failed: `RuntimeError: the IdP did not come back`"
        in (tmp_path / "report.md").read_text()
    )
    assert "N/A" in console_summary(checks)


def test_a_failed_herd_size_is_reported_as_failed_not_dropped(tmp_path: Path) -> None:
    summary = _summary()
    summary["cold_herd"]["100"] = {"error": "could only open 90 of 100 connections"}
    checks = write_report(summary, tmp_path)
    extra = next(c for c in checks if c.name == "cold herd p99 extra latency at every K")
    assert "K=100: failed" in extra.measured
    assert extra.met is False
    assert (
        "| 100 |  | failed: could only open 90 of 100 connections |"
        in (tmp_path / "report.md").read_text()
    )
