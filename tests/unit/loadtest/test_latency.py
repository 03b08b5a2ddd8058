"""Percentile math of loadtest/latency.py."""

from __future__ import annotations

import math
import random

import pytest

from loadtest.latency import LatencyHistogram, bucket_index, bucket_upper_us, percentile


def test_exact_percentile_is_nearest_rank() -> None:
    values = [15, 20, 35, 40, 50]
    assert percentile(values, 5) == 15
    assert percentile(values, 30) == 20
    assert percentile(values, 40) == 20
    assert percentile(values, 50) == 35
    assert percentile(values, 100) == 50


def test_exact_percentile_of_nothing_is_nan() -> None:
    assert math.isnan(percentile([], 99))


@pytest.mark.parametrize("q", [-1, 100.5])
def test_percentile_outside_range_is_rejected(q: float) -> None:
    with pytest.raises(ValueError, match="within"):
        percentile([1.0], q)
    with pytest.raises(ValueError, match="within"):
        LatencyHistogram.empty().percentile_us(q)


def test_bucket_edges_bound_every_value_within_one_percent() -> None:
    for value in (1.5, 10.0, 999.0, 12_345.0, 4_000_000.0):
        idx = bucket_index(value)
        assert bucket_upper_us(idx - 1) <= value * 1.0000001
        assert value <= bucket_upper_us(idx) <= value * 1.0101


def test_histogram_percentiles_are_within_one_percent_of_exact() -> None:
    rng = random.Random(3)  # noqa: S311
    samples = [rng.lognormvariate(6.0, 1.2) for _ in range(20_000)]  # µs, long tail
    hist = LatencyHistogram.empty()
    for s in samples:
        hist.record_us(s)
    for q in (50, 90, 99, 99.9):
        exact = percentile(samples, q)
        assert exact <= hist.percentile_us(q) <= exact * 1.0101


def test_histogram_never_reports_above_the_true_maximum() -> None:
    hist = LatencyHistogram.empty()
    hist.record_us(1234.0)
    assert hist.percentile_us(100) == 1234.0


def test_merged_histograms_equal_one_histogram_of_all_samples() -> None:
    rng = random.Random(5)  # noqa: S311
    a, b, whole = LatencyHistogram.empty(), LatencyHistogram.empty(), LatencyHistogram.empty()
    for i in range(5_000):
        v = rng.uniform(50, 5_000)
        (a if i % 2 else b).record_us(v)
        whole.record_us(v)
    a.merge(b)
    assert a.total == whole.total == 5_000
    assert a.counts == whole.counts
    assert a.summary_ms() == whole.summary_ms()


def test_summary_labels_and_units() -> None:
    hist = LatencyHistogram.empty()
    for ms in (1, 2, 3, 4):
        hist.record_s(ms / 1000)
    summary = hist.summary_ms()
    assert set(summary) == {"p50", "p90", "p99", "p999", "max"}
    assert summary["max"] == 4.0
    assert 2.0 <= summary["p50"] <= 2.02
