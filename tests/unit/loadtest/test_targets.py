"""The issue's targets evaluated from a fixture summary (loadtest/targets.py)."""

from __future__ import annotations

import json
from pathlib import Path

from loadtest.targets import evaluate

FIXTURE = Path(__file__).with_name("summary_fixture.json")


def _summary() -> dict:
    return json.loads(FIXTURE.read_text())


def test_targets_verdicts_follow_the_measured_figures() -> None:
    verdicts = {c.name: c.met for c in evaluate(_summary())}
    assert verdicts["cold herd upstream calls"] is True
    assert verdicts["cold herd p99 extra latency"] is False
    assert verdicts["http_tcp throughput vs trivial HTTP server"] is False
    assert verdicts["http_uds throughput vs trivial HTTP server"] is True
    assert verdicts["HTTP/UDS p99 at half capacity"] is True
    assert verdicts["executors amplification"] is True
    assert verdicts["IdP token requests"] is True
    assert verdicts["soak serve floor"] is True
    assert verdicts["memory for 10,000 keys"] is True
    assert verdicts["no refreshes for idle keys"] is True


def test_soak_floor_breach_is_a_miss() -> None:
    summary = _summary()
    summary["soak"]["min_remaining_s"] = 3.9
    verdicts = {c.name: c.met for c in evaluate(summary)}
    assert verdicts["soak serve floor"] is False


def test_missing_scenarios_are_not_measured_rather_than_met() -> None:
    checks = evaluate({"meta": {}})
    assert checks
    assert all(c.met is None for c in checks)
