"""Wall-clock time as a parameter, so expiry and memo decisions are testable with a fake clock."""

from __future__ import annotations

import time
from typing import Protocol

__all__ = ["Clock", "SystemClock"]


class Clock(Protocol):
    """Source of wall-clock time (epoch seconds), compared only with vended epoch expiries."""

    def now(self) -> float:
        """Seconds since the epoch."""
        ...


class SystemClock:
    """The real clock."""

    def now(self) -> float:
        """Seconds since the epoch, from ``time.time()``."""
        return time.time()
