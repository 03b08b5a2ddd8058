"""TaskRegistry: owns background tasks, cancels them on shutdown, reports dead loops."""

from __future__ import annotations

import asyncio
import logging

import pytest

from gateway.tasks import RegistryClosedError, TaskRegistry


async def test_done_tasks_leave_the_live_set() -> None:
    reg = TaskRegistry()

    async def quick() -> int:
        return 7

    task = reg.spawn(quick())
    assert await task == 7
    await asyncio.sleep(0)
    assert len(reg) == 0


async def test_one_failing_task_does_not_cancel_its_siblings() -> None:
    reg = TaskRegistry()
    gate = asyncio.Event()

    async def fail() -> None:
        raise RuntimeError("fetch failed")

    async def wait() -> str:
        await gate.wait()
        return "ok"

    failing = reg.spawn(fail())
    sibling = reg.spawn(wait())
    with pytest.raises(RuntimeError):
        await failing
    gate.set()
    assert await sibling == "ok"


async def test_cancel_all_cancels_and_awaits_everything() -> None:
    reg = TaskRegistry()
    cleaned = []

    async def forever() -> None:
        try:
            await asyncio.Event().wait()
        finally:
            cleaned.append(True)

    for _ in range(3):
        reg.spawn(forever())
    await asyncio.sleep(0)
    assert await reg.cancel_all(timeout_s=5) == 0
    assert cleaned == [True, True, True]
    assert len(reg) == 0


async def test_cancel_all_reports_tasks_that_refuse_to_stop() -> None:
    reg = TaskRegistry()
    release = asyncio.Event()

    async def stubborn() -> None:
        while not release.is_set():
            try:
                await release.wait()
            except asyncio.CancelledError:
                continue  # misbehaving on purpose

    task = reg.spawn(stubborn())
    await asyncio.sleep(0)
    assert await reg.cancel_all(timeout_s=0.05) == 1
    release.set()
    await task


async def test_spawn_after_close_is_refused() -> None:
    reg = TaskRegistry()
    await reg.cancel_all(timeout_s=1)

    async def never() -> None:
        pass

    with pytest.raises(RegistryClosedError):
        reg.spawn(never())


async def test_a_loop_that_dies_is_logged_and_counted(caplog: pytest.LogCaptureFixture) -> None:
    reg = TaskRegistry()

    async def loop() -> None:
        raise ValueError("refresher bug")

    task = reg.spawn(loop(), name="refresher", loop=True)
    with pytest.raises(ValueError, match="refresher bug"):
        await task
    await asyncio.sleep(0)
    assert reg.loop_exits == 1
    assert any("background loop exited" in r.getMessage() for r in caplog.records)


async def test_a_loop_cancelled_at_shutdown_is_not_an_error(
    caplog: pytest.LogCaptureFixture,
) -> None:
    reg = TaskRegistry()

    async def loop() -> None:
        await asyncio.Event().wait()

    reg.spawn(loop(), loop=True)
    await asyncio.sleep(0)
    with caplog.at_level(logging.ERROR):
        await reg.cancel_all(timeout_s=1)
    assert reg.loop_exits == 0
    assert not caplog.records
