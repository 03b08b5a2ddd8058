"""The cold herd's repeats (loadtest/scenarios/cold_herd.py): a K is reported by its median
herd, never by its luckiest or unluckiest one."""

from __future__ import annotations

from typing import Any

from loadtest.profile import QUICK, STANDARD
from loadtest.scenarios.cold_herd import _median_repeat, _repeats


def _row(extra: float, base: float, calls: int = 1, errors: int = 0) -> dict[str, Any]:
    return {"p99_extra_ms": extra, "baseline_p99_ms": base, "upstream_calls": calls,
            "errors": errors, "requests": 10, "latency_ms": {"p99": extra + 50.0}}


def test_a_k_is_its_median_herd_with_every_herds_figures_kept() -> None:
    """Regression: one herd of 10 per K, whose p99 is its slowest request, read 14.6 ms against
    a 10.5 ms bound in one run and under it in others."""
    rows = [_row(14.6, 7.0), _row(2.0, 6.0), _row(3.1, 8.0), _row(2.5, 30.0), _row(1.9, 7.5)]
    k = _median_repeat(rows)
    assert k["p99_extra_ms"] == 2.5
    assert k["baseline_p99_ms"] == 7.5
    assert k["latency_ms"] == {"p99": 52.5}  # the median herd's own latencies
    assert k["p99_extra_ms_each"] == [14.6, 2.0, 3.1, 2.5, 1.9]
    assert k["repeats"] == 5
    assert k["requests"] == 50
    assert k["upstream_calls"] == 1


def test_one_herd_with_other_than_one_upstream_call_shows_and_errors_add_up() -> None:
    k = _median_repeat([_row(1.0, 5.0), _row(1.0, 5.0, calls=2, errors=3), _row(1.0, 5.0)])
    assert k["upstream_calls"] == 2
    assert k["upstream_calls_each"] == [1, 2, 1]
    assert k["errors"] == 3


def test_a_single_herd_is_reported_as_it_is() -> None:
    row = _row(9.0, 4.0)
    assert _median_repeat([row]) == {**row, "repeats": 1}


def test_herds_up_to_a_thousand_repeat_and_the_ten_thousand_runs_once() -> None:
    assert [_repeats(STANDARD, k) for k in STANDARD.herd_ks] == [5, 5, 5, 5, 1]
    assert all(_repeats(QUICK, k) >= 1 for k in QUICK.herd_ks)
