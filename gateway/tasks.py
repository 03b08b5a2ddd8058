"""TaskRegistry: the one owner of every background task of the daemon.

Why not `asyncio.TaskGroup`: when one child fails a TaskGroup cancels its siblings, so one failed
credential fetch would tear down the refresher and every other fetch. The registry instead keeps a
set of live tasks (discarded when done), lets their owners consume results and errors, and cancels
and awaits whatever is left on shutdown. aiohttp >= 3.10 does not wait for stray tasks for us.

`TaskRegistry.spawn` is the `gateway.concurrency.Spawn` every component is given (the Core's
caches, single-flights, refresher and token source): nothing else creates long-lived tasks.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")

_log = logging.getLogger("lakegate.tasks")


class RegistryClosedError(RuntimeError):
    """Raised when a task is spawned after `cancel_all` started (reuse after close)."""


class TaskRegistry:
    """Spawn and track background tasks; cancel them all on shutdown.

    Long-running loops are spawned with `loop=True`: if such a task ends for any reason other than
    shutdown cancellation it is logged at ERROR and counted in `loop_exits`, because a refresher
    that silently died would leave hot keys to expire.
    """

    def __init__(self) -> None:
        self._tasks: set[asyncio.Task[Any]] = set()
        self._closing = False
        self.loop_exits = 0

    def __len__(self) -> int:
        return len(self._tasks)

    @property
    def live(self) -> frozenset[asyncio.Task[Any]]:
        """A snapshot of the tasks still running."""
        return frozenset(self._tasks)

    def spawn(
        self, coro: Coroutine[Any, Any, T], *, name: str | None = None, loop: bool = False
    ) -> asyncio.Task[T]:
        """Start `coro` as a task owned by this registry.

        Args:
            coro: the coroutine to run.
            name: task name, for logs and debugging.
            loop: mark a long-running loop whose unexpected exit must be logged and counted.

        Returns:
            The task; its owner awaits it (or not) and consumes its result or exception.

        Raises:
            RegistryClosedError: the registry is shutting down.
        """
        if self._closing:
            coro.close()
            raise RegistryClosedError("task registry is closed")
        task = asyncio.get_running_loop().create_task(coro, name=name)
        self._tasks.add(task)
        task.add_done_callback(self._on_loop_done if loop else self._tasks.discard)
        return task

    def _on_loop_done(self, task: asyncio.Task[Any]) -> None:
        self._tasks.discard(task)
        if task.cancelled() and self._closing:
            return
        self.loop_exits += 1
        exc = None if task.cancelled() else task.exception()
        _log.error(
            "background loop exited unexpectedly",
            extra={"task": task.get_name(), "error": type(exc).__name__ if exc else None},
            exc_info=exc,
        )

    async def cancel_all(self, timeout_s: float) -> int:
        """Cancel every live task and wait up to `timeout_s` for them to finish.

        Returns:
            How many tasks were still not finished when the timeout elapsed.
        """
        self._closing = True
        pending = set(self._tasks)
        for task in pending:
            task.cancel()
        if not pending:
            return 0
        # asyncio.wait never raises the tasks' exceptions, and never cancels them on timeout.
        _, still = await asyncio.wait(pending, timeout=max(timeout_s, 0.0))
        for task in pending - still:
            if not task.cancelled():
                task.exception()  # mark as retrieved: the owner may have left already
        if still:
            _log.warning("tasks did not finish after cancellation", extra={"count": len(still)})
        return len(still)
