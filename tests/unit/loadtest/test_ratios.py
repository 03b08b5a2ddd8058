"""Interleaved-pair ratios (loadtest/ratios.py): median, quartiles, and the lower-quartile rule."""

from __future__ import annotations

import pytest

from loadtest.ratios import RatioStats


def test_each_pair_is_one_ratio_sample() -> None:
    stats = RatioStats.of_pairs([(900.0, 1000.0), (1800.0, 2000.0), (1000.0, 1000.0)])
    assert stats.ratios == pytest.approx((0.9, 0.9, 1.0))
    assert stats.median == pytest.approx(0.9)


def test_a_pair_whose_baseline_made_no_request_is_left_out() -> None:
    stats = RatioStats.of_pairs([(900.0, 0.0), (900.0, 1000.0)])
    assert stats.n == 1
    assert stats.quartiles == pytest.approx((0.9, 0.9))


def test_the_target_is_met_by_the_lower_quartile_not_by_a_lucky_pair() -> None:
    # One excellent pair among poor ones: the best ratio (1.2) and even the mean would pass 0.8.
    stats = RatioStats.of_pairs([(70, 100), (72, 100), (75, 100), (78, 100), (120, 100)])
    assert max(stats.ratios) >= 0.8
    assert stats.meets(0.8) is False
    steady = RatioStats.of_pairs([(85, 100), (88, 100), (90, 100), (92, 100), (60, 100)])
    assert steady.meets(0.8) is True  # one bad pair in five does not sink a steady surface


def test_quartiles_are_inclusive_and_ordered() -> None:
    stats = RatioStats.of_pairs([(r, 100.0) for r in (80.0, 90.0, 100.0, 110.0, 120.0)])
    q1, q3 = stats.quartiles or (0.0, 0.0)
    assert (q1, q3) == pytest.approx((0.9, 1.1))
    summary = stats.summary()
    assert summary["pairs"] == 5
    assert (summary["min"], summary["median"], summary["max"]) == (0.8, 1.0, 1.2)


def test_nothing_measured_is_not_a_verdict() -> None:
    stats = RatioStats.of_pairs([])
    assert stats.meets(0.8) is None
    assert stats.summary()["median"] is None
