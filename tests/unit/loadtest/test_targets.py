"""The issue's targets evaluated from a fixture summary (loadtest/targets.py)."""

from __future__ import annotations

import json
from pathlib import Path

from loadtest.targets import evaluate

FIXTURE = Path(__file__).with_name("summary_fixture.json")


def _summary() -> dict:
    return json.loads(FIXTURE.read_text())


# The fixture's figures miss these two targets and meet the others listed.
MISSED = {"cold herd p99 extra latency at K=10,000", "cold herd p99 extra latency at every K",
          "http_tcp throughput vs trivial HTTP server"}
MET = {
    "cold herd upstream calls",
    "http_uds throughput vs trivial HTTP server",
    "HTTP/UDS p99 at half capacity",
    "executors amplification",
    "IdP token requests",
    "upstream credential calls vs direct_memo",
    "scaling: upstream calls per node, table and lifetime",
    "soak serve floor",
    "memory for 10,000 keys",
    "no refreshes for idle keys",
}


def test_targets_verdicts_follow_the_measured_figures() -> None:
    verdicts = {c.name: c.met for c in evaluate(_summary())}
    expected = {**dict.fromkeys(MET, True), **dict.fromkeys(MISSED, False)}
    assert {name: verdicts.get(name) for name in expected} == expected


def test_soak_floor_breach_is_a_miss() -> None:
    summary = _summary()
    summary["soak"]["min_remaining_s"] = 3.9
    verdicts = {c.name: c.met for c in evaluate(summary)}
    assert verdicts["soak serve floor"] is False


def test_missing_scenarios_are_not_measured_rather_than_met() -> None:
    checks = evaluate({"meta": {}})
    assert checks
    assert all(c.met is None for c in checks)


def test_direct_memo_reduction_under_50x_is_a_miss() -> None:
    summary = _summary()
    summary["executors"]["reduction_vs_direct_memo"] = 49.9
    check = next(c for c in evaluate(summary) if c.name.endswith("vs direct_memo"))
    assert check.met is False
    assert check.measured.startswith("49.9 x")


def test_one_scaling_row_above_1_5_or_with_errors_is_a_miss_and_baseline_rows_do_not_count(
) -> None:
    summary = _summary()
    name = "scaling: upstream calls per node, table and lifetime"
    # direct_memo rows are far above 1.5 by design: they are the baseline, not the gateway
    assert {c.name: c.met for c in evaluate(summary)}[name] is True
    summary["scaling"][4]["upstream_per_node_table_lifetime"] = 1.51
    check = next(c for c in evaluate(summary) if c.name == name)
    assert check.met is False
    assert "2x100: 1.51" in check.measured
    summary["scaling"][4]["upstream_per_node_table_lifetime"] = 1.2
    summary["scaling"][0]["errors"] = 3
    assert {c.name: c.met for c in evaluate(summary)}[name] is False


def test_the_herd_tail_bound_is_1_5_x_the_trivial_servers_p99_for_the_same_burst() -> None:
    summary = _summary()
    check = next(c for c in evaluate(summary)
                 if c.name == "cold herd p99 extra latency at every K")
    assert check.met is False  # 812.5 ms > 1.5 x 500 ms
    assert "K=10000: 812.5 ms (bound 750.0 ms)" in check.measured
    assert "K=1: 1.2 ms (bound 5.0 ms)" in check.measured  # no baseline: the 5 ms floor
    issue = next(c for c in evaluate(summary)
                 if c.name == "cold herd p99 extra latency at K=10,000")
    assert (issue.met, issue.measured) == (False, "812.5 ms (bound 750.0 ms)")
    summary["cold_herd"]["10000"]["baseline_p99_ms"] = 550.0
    checks = {c.name: c.met for c in evaluate(summary)}
    assert checks["cold herd p99 extra latency at every K"] is True  # 812.5 ms <= 825 ms
    assert checks["cold herd p99 extra latency at K=10,000"] is True
    # A miss at a small K fails the every-K check only: the issue's bound is K = 10,000's.
    summary["cold_herd"]["1"]["p99_extra_ms"] = 7.5
    checks = {c.name: c.met for c in evaluate(summary)}
    assert checks["cold herd p99 extra latency at every K"] is False
    assert checks["cold herd p99 extra latency at K=10,000"] is True


def test_the_aws_surface_is_held_to_the_http_ratio() -> None:
    summary = _summary()
    summary.setdefault("surfaces", {})["aws"] = {"by_concurrency": {
        "64": {"ratio": {"pairs": 5, "median": 0.92, "q1": 0.89, "q3": 0.95}}}}
    check = next(c for c in evaluate(summary) if c.name.startswith("aws throughput"))
    assert check.met is False
    summary["surfaces"]["aws"]["by_concurrency"]["64"]["ratio"]["q1"] = 0.9
    check = next(c for c in evaluate(summary) if c.name.startswith("aws throughput"))
    assert check.met is True


def test_a_surface_target_holds_at_every_concurrency_by_its_lower_quartile() -> None:
    summary = _summary()
    name = "http_uds throughput vs trivial HTTP server"
    check = next(c for c in evaluate(summary) if c.name == name)
    assert check.met is True
    assert "c=64: 0.95 [0.94-0.96] x5" in check.measured
    # A second concurrency whose median passes but whose lower quartile does not: a miss.
    summary["surfaces"]["http_uds"]["by_concurrency"]["1"] = {
        "rps": 1.0, "baseline_rps": 1.0,
        "ratio": {"pairs": 5, "median": 0.91, "q1": 0.85, "q3": 0.95},
    }
    check = next(c for c in evaluate(summary) if c.name == name)
    assert check.met is False


def test_grpc_surfaces_are_held_to_0_8() -> None:
    summary = _summary()
    summary["surfaces"]["grpc_tcp"] = {"by_concurrency": {
        "16": {"ratio": {"pairs": 5, "median": 0.84, "q1": 0.81, "q3": 0.86}}}}
    check = next(c for c in evaluate(summary) if c.name.startswith("grpc_tcp"))
    assert check.met is True
    summary["surfaces"]["grpc_tcp"]["by_concurrency"]["16"]["ratio"]["q1"] = 0.79
    check = next(c for c in evaluate(summary) if c.name.startswith("grpc_tcp"))
    assert check.met is False


def _writes(q3: float) -> dict:
    cell = {"pairs": 3, "median": 1.1, "q1": 1.0, "q3": q3}
    return {"rows": 1000, "pairs": 3,
            "parquet@8": {"append": {"ratio": cell}, "overwrite": {"ratio": dict(cell)}},
            "parquet@200": {"append": {"ratio": dict(cell)}, "overwrite": {"ratio": dict(cell)}}}


def test_the_write_target_is_1_25_x_the_direct_write_at_every_partition_count_and_mode() -> None:
    summary = _summary()
    summary["writes"] = _writes(1.2)
    name = "Spark data source write time vs the direct write, parquet"
    check = next(c for c in evaluate(summary) if c.name == name)
    assert check.met is True
    assert "200 overwrite: 1.10 [1.00-1.20]" in check.measured
    summary["writes"]["parquet@200"]["overwrite"]["ratio"]["q3"] = 1.3
    assert next(c for c in evaluate(summary) if c.name == name).met is False


def test_a_failed_write_scenario_is_not_measured() -> None:
    summary = _summary()
    summary["writes"] = {"error": "boom"}
    (check,) = [c for c in evaluate(summary) if c.name.startswith("Spark data source write")]
    assert check.met is None
