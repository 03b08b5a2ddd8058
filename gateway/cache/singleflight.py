"""SingleFlight: collapse concurrent calls for one key into one upstream call.

The shared call runs in its own task, spawned through the App's task registry (not a
TaskGroup: one failed fetch must not cancel its siblings), so a waiter that is cancelled or
times out never cancels it for the others. Errors reach every current waiter and are not
remembered: the next call after a failure starts a new flight.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine, Hashable
from functools import partial
from typing import Any, Generic, TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")

Spawn = Callable[[Coroutine[Any, Any, Any]], "asyncio.Task[Any]"]


class SingleFlight(Generic[K, V]):
    """One owned task per key; waiters are shielded and bound their own wait."""

    def __init__(self, spawn: Spawn) -> None:
        self._spawn = spawn
        self._inflight: dict[K, asyncio.Task[V]] = {}

    def __len__(self) -> int:
        return len(self._inflight)

    def __contains__(self, key: object) -> bool:
        return key in self._inflight

    def start(
        self, key: K, fetch: Callable[[], Coroutine[Any, Any, V]]
    ) -> tuple[asyncio.Task[V], bool]:
        """The flight for `key`, started if none runs.

        Returns:
            (task, coalesced): `coalesced` is True when an existing flight was joined.
        """
        task = self._inflight.get(key)
        if task is not None and not task.done():
            return task, True
        task = self._spawn(fetch())
        self._inflight[key] = task
        task.add_done_callback(partial(self._forget, key))
        return task, False

    async def run(self, key: K, fetch: Callable[[], Coroutine[Any, Any, V]]) -> tuple[V, bool]:
        """Join or start the flight for `key` and wait for it (shielded).

        The caller wraps this in `asyncio.timeout()`: leaving early never cancels the flight.
        """
        task, coalesced = self.start(key, fetch)
        return await asyncio.shield(task), coalesced

    def forget(self, key: K) -> None:
        """Detach a running flight (after an invalidation): later calls start a new one,
        current waiters still get the old answer."""
        self._inflight.pop(key, None)

    def _forget(self, key: K, task: asyncio.Task[V]) -> None:
        if self._inflight.get(key) is task:  # a newer flight may already exist
            del self._inflight[key]
        if not task.cancelled():
            task.exception()  # mark as retrieved even if every waiter left
