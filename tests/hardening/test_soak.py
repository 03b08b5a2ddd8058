"""Flatness verdict of the soak (memory and open fds, early vs late window)."""

from __future__ import annotations

from hardening.soak import Sample, flatness

MiB = 1 << 20


def series(rss_mib: list[float], fds: list[int]) -> list[Sample]:
    return [
        Sample(float(i), int(r * MiB), f, 0, 4)
        for i, (r, f) in enumerate(zip(rss_mib, fds, strict=True))
    ]


def test_steady_memory_and_fds_are_flat_even_with_one_spike() -> None:
    rss = [80.0] * 20 + [140.0] + [81.0] * 19
    problems, stats = flatness(series(rss, [40] * 40))
    assert problems == []
    assert stats["rss_max_mib"] == 140.0


def test_memory_that_keeps_growing_is_reported() -> None:
    problems, _ = flatness(series([80.0 + 2 * i for i in range(40)], [40] * 40))
    assert any("memory grew" in p for p in problems)


def test_fds_that_keep_growing_are_reported() -> None:
    problems, _ = flatness(series([80.0] * 40, [40 + i for i in range(40)]))
    assert any("open fds grew" in p for p in problems)


def test_too_short_a_run_cannot_be_judged_flat() -> None:
    problems, _ = flatness(series([80.0] * 3, [40] * 3))
    assert problems == ["too few samples to judge flatness"]
