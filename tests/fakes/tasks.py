"""FakeTaskRegistry: the App's spawn contract (a live set, cancel_all) for unit tests."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any


class FakeTaskRegistry:
    """Tracks spawned tasks so tests can assert none leak and cancel them at teardown."""

    def __init__(self) -> None:
        self.tasks: set[asyncio.Task[Any]] = set()
        self.spawned = 0

    def spawn(self, coro: Coroutine[Any, Any, Any]) -> asyncio.Task[Any]:
        task = asyncio.get_running_loop().create_task(coro)
        self.spawned += 1
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)
        return task

    @property
    def live(self) -> int:
        return sum(1 for t in self.tasks if not t.done())

    async def drained(self, timeout_s: float = 5.0) -> None:
        """Wait until every spawned task finished and its done-callbacks ran."""
        async with asyncio.timeout(timeout_s):
            while self.tasks:
                await asyncio.wait(set(self.tasks))
                await asyncio.sleep(0)  # done-callbacks (e.g. SingleFlight._forget) run now
        await asyncio.sleep(0)

    async def cancel_all(self) -> None:
        for t in list(self.tasks):
            t.cancel()
        if self.tasks:
            await asyncio.wait(set(self.tasks), timeout=5)
