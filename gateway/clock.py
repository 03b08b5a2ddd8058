"""Time behind one small Protocol, so policies are pure functions of it and tests use FakeClock.

Nothing else in `gateway/` calls `time.*` or `asyncio.sleep` for scheduling decisions.
`monotonic()` schedules; `now()` (epoch seconds) is compared only with vended epoch-ms expiries.
"""

from __future__ import annotations

import asyncio
import time
from typing import Protocol, runtime_checkable


@runtime_checkable
class Clock(Protocol):
    """Monotonic time for scheduling, wall time for vended expiries, and a sleep."""

    def monotonic(self) -> float: ...

    def now(self) -> float: ...

    async def sleep(self, seconds: float) -> None: ...


class SystemClock:
    """The real clock. `monotonic` and `now` are the C functions themselves (no Python frame:
    the request accounting reads the clock twice per request)."""

    monotonic = staticmethod(time.monotonic)
    now = staticmethod(time.time)

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(max(0.0, seconds))
