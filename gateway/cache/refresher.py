"""RefreshAhead: the background loop that keeps hot keys from ever missing.

It scans the cache for keys used within the idle window whose remaining lifetime fell below
their jittered `refresh_lead`, queues them, and starts their refreshes through a token
bucket (`refresh_rate_per_s`), so a thundering herd of keys fetched together cannot become a
thundering herd of refreshes. Caller misses never queue: they fetch at once (they have
priority). The same scan evicts idle and expired entries.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from dataclasses import dataclass, field

from gateway.cache.credential_cache import CredentialCache
from gateway.clock import Clock
from gateway.concurrency import Spawn, TokenBucket
from gateway.metrics import Metrics
from gateway.models import CacheKey
from gateway.settings import CacheSettings
from gateway.tuning import (
    REFRESH_ERROR_PAUSE_S,
    REFRESH_MAX_IDLE_WAIT_S,
    REFRESH_MIN_SCAN_INTERVAL_S,
    REFRESH_MIN_WAIT_S,
)

log = logging.getLogger(__name__)

@dataclass(eq=False, repr=False)
class RefreshAhead:
    """Owns one long-running task (spawned via the App's registry) and a dedup queue."""

    cache: CredentialCache
    settings: CacheSettings
    clock: Clock
    metrics: Metrics
    spawn: Spawn
    _bucket: TokenBucket = field(init=False)
    _queue: deque[CacheKey] = field(init=False, default_factory=deque)
    _queued: set[CacheKey] = field(init=False, default_factory=set)
    _wake: asyncio.Event = field(init=False, default_factory=asyncio.Event)
    _task: asyncio.Task[None] | None = field(init=False, default=None)

    def __post_init__(self) -> None:
        self._bucket = TokenBucket(self.settings.refresh_rate_per_s, self.clock)
        self.cache.attach_wakeup(self._wake)

    @property
    def queue_depth(self) -> int:
        return len(self._queue)

    def start(self) -> None:
        """Start the loop (idempotent)."""
        if self._task is None:
            self._task = self.spawn(self._run())

    async def close(self) -> None:
        """Cancel the loop and wait for it to finish."""
        task, self._task = self._task, None
        if task is not None and not task.done():
            task.cancel()
            await asyncio.wait({task})

    def enqueue(self, keys: list[CacheKey]) -> None:
        for key in keys:
            if key not in self._queued:
                self._queued.add(key)
                self._queue.append(key)
        self.metrics.refresh_queue_depth.set(len(self._queue))

    async def run_once(self) -> float | None:
        """One scan plus draining the queue through the rate limiter (tests drive this).

        Returns:
            Seconds until the next entry may become due (None: nothing cached).
        """
        due, next_in = self.cache.scan()
        self.enqueue(due)
        while self._queue:
            key = self._queue[0]
            if not self.cache.is_due(key):
                self._pop()
                continue
            await self._bucket.acquire()
            self._pop()
            if self.cache.is_due(key):  # the wait may have made it moot
                self.cache.start_refresh(key)
        return next_in

    def _pop(self) -> None:
        key = self._queue.popleft()
        self._queued.discard(key)
        self.metrics.refresh_queue_depth.set(len(self._queue))

    async def _run(self) -> None:
        last_scan = self.clock.monotonic() - REFRESH_MIN_SCAN_INTERVAL_S
        while True:
            try:
                since = self.clock.monotonic() - last_scan
                if since < REFRESH_MIN_SCAN_INTERVAL_S:
                    await self.clock.sleep(REFRESH_MIN_SCAN_INTERVAL_S - since)
                self._wake.clear()
                last_scan = self.clock.monotonic()
                next_in = await self.run_once()
                wait = (REFRESH_MAX_IDLE_WAIT_S if next_in is None
                        else min(REFRESH_MAX_IDLE_WAIT_S, next_in))
                wait = max(REFRESH_MIN_WAIT_S, wait)
                self.cache.plan_scan(self.clock.monotonic() + wait)
                await self._sleep_or_wake(wait)
            except Exception:
                # The loop must outlive any single bad scan; it is the only refresher.
                log.exception("refresh-ahead loop iteration failed")
                await self.clock.sleep(REFRESH_ERROR_PAUSE_S)

    async def _sleep_or_wake(self, seconds: float) -> None:
        sleeper = asyncio.ensure_future(self.clock.sleep(seconds))
        waker = asyncio.ensure_future(self._wake.wait())
        try:
            await asyncio.wait({sleeper, waker}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            # Cancel, never await: awaiting here could swallow our own cancellation.
            for t in (sleeper, waker):
                if not t.done():
                    t.cancel()
