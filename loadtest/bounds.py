"""Every load loop is bounded in count and in time; this module is the one definition of that.

A loop asks `Bounds.exhausted(done, elapsed_s)` before each iteration, and `Bounds.split(n, i)`
divides a budget between worker processes so that the shares add up to the whole.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass


class BoundsError(ValueError):
    """A loop bound was missing or not positive (an unbounded loop is a defect)."""


@dataclass(frozen=True)
class Bounds:
    """At most `max_requests` iterations and at most `max_duration_s` seconds.

    Args:
        max_requests: hard cap on iterations (> 0).
        max_duration_s: hard cap on wall time in seconds (> 0 and finite).

    Raises:
        BoundsError: if either cap is missing, not positive or infinite.
    """

    max_requests: int
    max_duration_s: float

    def __post_init__(self) -> None:
        if not isinstance(self.max_requests, int) or self.max_requests <= 0:
            raise BoundsError(f"max_requests must be a positive int, got {self.max_requests!r}")
        if not (self.max_duration_s > 0 and math.isfinite(self.max_duration_s)):
            raise BoundsError(
                f"max_duration_s must be positive and finite, got {self.max_duration_s!r}"
            )

    def exhausted(self, done: int, elapsed_s: float) -> bool:
        """True once either cap is reached."""
        return done >= self.max_requests or elapsed_s >= self.max_duration_s

    def split(self, parts: int, index: int = 0) -> Bounds:
        """Worker `index`'s share when `parts` workers run this budget in parallel: the request
        caps of all shares add up exactly to the whole (at least 1 each)."""
        if parts <= 0 or not 0 <= index < parts:
            raise BoundsError(f"need 0 <= index < parts, got index={index} parts={parts}")
        share = self.max_requests // parts + (1 if index < self.max_requests % parts else 0)
        return Bounds(max(1, share), self.max_duration_s)


class Deadline:
    """A monotonic deadline for a whole scenario (waits and polls check it)."""

    def __init__(self, seconds: float) -> None:
        if not (seconds > 0 and math.isfinite(seconds)):
            raise BoundsError(f"deadline must be positive and finite, got {seconds!r}")
        self._end = time.monotonic() + seconds

    def remaining_s(self) -> float:
        return max(0.0, self._end - time.monotonic())

    def expired(self) -> bool:
        return time.monotonic() >= self._end
