import asyncio

import pytest

from gateway.cache.singleflight import SingleFlight
from gateway.errors import UnavailableError


async def test_concurrent_calls_share_one_fetch(registry):
    flight: SingleFlight[str, int] = SingleFlight(registry.spawn)
    gate = asyncio.Event()
    calls = 0

    async def fetch() -> int:
        nonlocal calls
        calls += 1
        await gate.wait()
        return 42

    waiters = [asyncio.ensure_future(flight.run("k", fetch)) for _ in range(100)]
    await asyncio.sleep(0)
    gate.set()
    async with asyncio.timeout(5):
        results = await asyncio.gather(*waiters)
    assert calls == 1
    assert [v for v, _ in results] == [42] * 100
    assert sum(1 for _, coalesced in results if not coalesced) == 1
    assert len(flight) == 0


async def test_cancelled_waiter_does_not_cancel_shared_fetch(registry):
    flight: SingleFlight[str, int] = SingleFlight(registry.spawn)
    gate = asyncio.Event()

    async def fetch() -> int:
        await gate.wait()
        return 7

    first = asyncio.ensure_future(flight.run("k", fetch))
    second = asyncio.ensure_future(flight.run("k", fetch))
    await asyncio.sleep(0)
    first.cancel()
    await asyncio.sleep(0)
    gate.set()
    async with asyncio.timeout(5):
        assert await second == (7, True)
    assert first.cancelled()


async def test_waiter_timeout_leaves_the_fetch_running_and_then_forgotten(registry):
    flight: SingleFlight[str, int] = SingleFlight(registry.spawn)
    gate = asyncio.Event()

    async def fetch() -> int:
        await gate.wait()
        return 1

    with pytest.raises(TimeoutError):
        async with asyncio.timeout(0.01):
            await flight.run("k", fetch)
    assert "k" in flight
    gate.set()
    await registry.drained()
    assert "k" not in flight
    assert registry.live == 0


async def test_errors_reach_every_waiter_and_are_not_remembered(registry):
    flight: SingleFlight[str, int] = SingleFlight(registry.spawn)
    gate = asyncio.Event()
    calls = 0

    async def failing() -> int:
        nonlocal calls
        calls += 1
        await gate.wait()
        raise UnavailableError("down")

    waiters = [asyncio.ensure_future(flight.run("k", failing)) for _ in range(10)]
    await asyncio.sleep(0)
    gate.set()
    async with asyncio.timeout(5):
        results = await asyncio.gather(*waiters, return_exceptions=True)
    assert all(isinstance(r, UnavailableError) for r in results)
    assert calls == 1

    async def ok() -> int:
        return 5

    async with asyncio.timeout(5):
        assert await flight.run("k", ok) == (5, False)


async def test_failed_fetch_without_waiters_does_not_warn_unretrieved(registry):
    flight: SingleFlight[str, int] = SingleFlight(registry.spawn)

    async def failing() -> int:
        raise UnavailableError("down")

    task, coalesced = flight.start("k", failing)
    assert coalesced is False
    async with asyncio.timeout(5):
        await asyncio.wait({task})
    # _forget marked the exception retrieved; filterwarnings=error would fail otherwise.
    assert isinstance(task.exception(), UnavailableError)


async def test_forget_lets_the_next_call_start_a_new_flight(registry):
    flight: SingleFlight[str, int] = SingleFlight(registry.spawn)
    gate = asyncio.Event()
    values = iter([1, 2])

    async def fetch() -> int:
        v = next(values)
        await gate.wait()
        return v

    old = asyncio.ensure_future(flight.run("k", fetch))
    await asyncio.sleep(0)
    flight.forget("k")
    new = asyncio.ensure_future(flight.run("k", fetch))
    await asyncio.sleep(0)
    gate.set()
    async with asyncio.timeout(5):
        assert await old == (1, False)
        assert await new == (2, False)
