"""FakeClock: time that moves only when a test says so; sleepers wake when it passes them."""

from __future__ import annotations

import asyncio
import heapq
import itertools


class FakeClock:
    """Implements gateway.clock.Clock. Wall and monotonic time advance together.

    `step_wall` steps only the wall clock the gateway sees (`now()`), like an NTP step or a
    mis-set host clock; `true_now()` stays the real time, which fakes of the catalog and the
    storage use to vend and judge expiries.
    """

    def __init__(self, *, wall: float = 1_800_000_000.0, mono: float = 10_000.0) -> None:
        self._wall = wall
        self._mono = mono
        self._wall_step = 0.0
        self._sleepers: list[tuple[float, int, asyncio.Future[None]]] = []
        self._seq = itertools.count()

    def monotonic(self) -> float:
        return self._mono

    def now(self) -> float:
        return self._wall + self._wall_step

    def true_now(self) -> float:
        """The real wall time (unaffected by `step_wall`)."""
        return self._wall

    def step_wall(self, seconds: float) -> None:
        """Step the local wall clock by `seconds` (either way); monotonic time is untouched."""
        self._wall_step += seconds

    async def sleep(self, seconds: float) -> None:
        if seconds <= 0:
            await asyncio.sleep(0)
            return
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        heapq.heappush(self._sleepers, (self._mono + seconds, next(self._seq), fut))
        await fut

    @property
    def sleepers(self) -> int:
        """Sleepers still waiting (cancelled ones excluded)."""
        return sum(1 for _, _, f in self._sleepers if not f.done())

    def advance(self, seconds: float) -> None:
        """Move time forward and wake every sleeper whose deadline passed."""
        self._mono += seconds
        self._wall += seconds
        while self._sleepers and self._sleepers[0][0] <= self._mono:
            _, _, fut = heapq.heappop(self._sleepers)
            if not fut.done():
                fut.set_result(None)

    async def settle(self, ticks: int = 50) -> None:
        """Let the loop run woken tasks (bounded)."""
        for _ in range(ticks):
            await asyncio.sleep(0)

    async def run_for(self, seconds: float, step: float = 1.0, ticks: int = 20) -> None:
        """Advance `seconds` in `step`s, settling after each, so chained sleeps progress."""
        steps = max(1, round(seconds / step))
        for _ in range(steps):
            self.advance(seconds / steps)
            await self.settle(ticks)
