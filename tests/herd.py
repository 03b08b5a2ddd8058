"""The thundering-herd shape of the single-flight tests: many callers wait on one gated fetch."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any, Generic, TypeVar

T = TypeVar("T")


class GatedFetch(Generic[T]):
    """A fetch that counts its calls and answers (or raises) only once `gate` opens."""

    def __init__(self, answer: T | BaseException, gate: asyncio.Event | None = None) -> None:
        self.answer = answer
        self.gate = gate if gate is not None else asyncio.Event()
        self.calls = 0

    async def __call__(self) -> T:
        self.calls += 1
        await self.gate.wait()
        if isinstance(self.answer, BaseException):
            raise self.answer
        return self.answer


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
