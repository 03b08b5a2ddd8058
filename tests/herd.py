"""The thundering-herd shape of the single-flight tests: many callers wait on one gated fetch."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any


async def _one_turn() -> None:
    await asyncio.sleep(0)


async def gated_herd(
    n: int,
    call: Callable[[], Awaitable[Any]],
    gate: asyncio.Event,
    *,
    settle: Callable[[], Awaitable[None]] = _one_turn,
    timeout_s: float = 10.0,
    return_exceptions: bool = False,
) -> list[Any]:
    """Start `n` concurrent `call()`s, let them reach the shared fetch (`settle`), open the
    fetch's `gate`, and gather every answer under a timeout."""
    waiters = [asyncio.ensure_future(call()) for _ in range(n)]
    await settle()
    gate.set()
    async with asyncio.timeout(timeout_s):
        return await asyncio.gather(*waiters, return_exceptions=return_exceptions)
