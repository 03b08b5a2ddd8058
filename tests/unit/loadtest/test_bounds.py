"""Scenario bounding: every loop has a count cap and a time cap (loadtest/bounds.py)."""

from __future__ import annotations

import math

import pytest

from loadtest.bounds import Bounds, BoundsError, Deadline


@pytest.mark.parametrize(
    ("requests", "duration"),
    [(0, 1.0), (-5, 1.0), (10, 0.0), (10, -1.0), (10, math.inf), (10, math.nan)],
)
def test_unbounded_or_empty_caps_are_rejected(requests: int, duration: float) -> None:
    with pytest.raises(BoundsError):
        Bounds(requests, duration)


def test_exhausted_by_count_or_by_time_whichever_first() -> None:
    b = Bounds(100, 5.0)
    assert not b.exhausted(99, 4.99)
    assert b.exhausted(100, 0.0)
    assert b.exhausted(0, 5.0)


def test_split_shares_add_up_exactly_to_the_whole_request_budget() -> None:
    b = Bounds(1_000, 3.0)
    for parts in (1, 3, 4, 7):
        shares = [b.split(parts, i) for i in range(parts)]
        assert sum(s.max_requests for s in shares) == 1_000
        assert all(s.max_duration_s == 3.0 for s in shares)
    with pytest.raises(BoundsError):
        b.split(0)
    with pytest.raises(BoundsError):
        b.split(4, 4)


def test_deadline_must_be_finite_and_reports_remaining_time() -> None:
    with pytest.raises(BoundsError):
        Deadline(math.inf)
    d = Deadline(60)
    assert not d.expired()
    assert 0 < d.remaining_s() <= 60
