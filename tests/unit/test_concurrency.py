import asyncio

import pytest

from gateway.concurrency import FlightTimeout, SingleFlight, TokenBucket
from gateway.errors import UnavailableError
from tests.fakes.clock import FakeClock
from tests.herd import GatedFetch, gated_herd


async def test_concurrent_calls_share_one_fetch(registry):
    flight: SingleFlight[str, int] = SingleFlight(registry.spawn)
    fetch = GatedFetch(42)
    results = await gated_herd(100, lambda: flight.run("k", fetch), fetch.gate)
    assert fetch.calls == 1
    assert [v for v, _ in results] == [42] * 100
    assert sum(1 for _, coalesced in results if not coalesced) == 1
    assert len(flight) == 0


async def test_cancelled_waiter_does_not_cancel_shared_fetch(registry):
    flight: SingleFlight[str, int] = SingleFlight(registry.spawn)
    fetch = GatedFetch(7)
    first = asyncio.ensure_future(flight.run("k", fetch))
    second = asyncio.ensure_future(flight.run("k", fetch))
    await asyncio.sleep(0)
    first.cancel()
    await asyncio.sleep(0)
    fetch.gate.set()
    async with asyncio.timeout(5):
        assert await second == (7, True)
    assert first.cancelled()


async def test_waiter_timeout_leaves_the_fetch_running_and_then_forgotten(registry):
    flight: SingleFlight[str, int] = SingleFlight(registry.spawn)
    fetch = GatedFetch(1)
    with pytest.raises(TimeoutError):
        async with asyncio.timeout(0.01):
            await flight.run("k", fetch)
    assert "k" in flight
    fetch.gate.set()
    await registry.drained()
    assert "k" not in flight
    assert registry.live == 0


async def test_errors_reach_every_waiter_and_are_not_remembered(registry):
    flight: SingleFlight[str, int] = SingleFlight(registry.spawn)
    failing: GatedFetch[int] = GatedFetch(UnavailableError("down"))
    results = await gated_herd(10, lambda: flight.run("k", failing), failing.gate,
                               return_exceptions=True)
    assert all(isinstance(r, UnavailableError) for r in results)
    assert failing.calls == 1

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


async def test_a_waiters_own_deadline_raises_flight_timeout_and_the_others_still_get_the_answer(
    registry,
):
    flight: SingleFlight[str, int] = SingleFlight(registry.spawn)
    fetch = GatedFetch(3)
    patient = asyncio.ensure_future(flight.run("k", fetch, timeout_s=30))
    await asyncio.sleep(0)
    with pytest.raises(FlightTimeout):
        await flight.run("k", fetch, timeout_s=0.01)
    assert flight.running("k")
    fetch.gate.set()
    async with asyncio.timeout(5):
        assert await patient == (3, False)


async def test_a_cancelled_shared_call_cancels_its_waiters(registry):
    flight: SingleFlight[str, int] = SingleFlight(registry.spawn)

    async def fetch() -> int:
        await asyncio.Event().wait()
        return 0

    waiter = asyncio.ensure_future(flight.run("k", fetch, timeout_s=30))
    await asyncio.sleep(0)
    for task in flight.tasks():
        task.cancel()
    with pytest.raises(asyncio.CancelledError):
        async with asyncio.timeout(5):
            await waiter


def test_token_bucket_allows_a_burst_then_the_rate():
    clock = FakeClock()
    bucket = TokenBucket(5, clock)
    assert sum(bucket.try_acquire() for _ in range(10)) == 5
    clock.advance(1.0)
    assert sum(bucket.try_acquire() for _ in range(10)) == 5


def test_token_bucket_says_how_long_until_the_next_token():
    clock = FakeClock()
    bucket = TokenBucket(2.0, clock, burst=2)
    assert bucket.try_acquire()
    assert bucket.try_acquire()
    assert not bucket.try_acquire()
    assert bucket.wait_s() == pytest.approx(0.5)
    clock.advance(0.5)
    assert bucket.try_acquire()


def test_the_primitives_and_the_tuning_are_leaves():
    import ast
    from pathlib import Path

    root = Path(__file__).resolve().parents[2] / "gateway"

    def gateway_imports(name: str) -> set[str]:
        tree = ast.parse((root / name).read_text())
        return {n.module for n in ast.walk(tree)
                if isinstance(n, ast.ImportFrom) and n.module and n.module.startswith("gateway")}

    assert gateway_imports("tuning.py") == set()
    assert gateway_imports("concurrency.py") <= {"gateway.clock", "gateway.tuning"}


async def test_the_waiting_count_follows_every_way_a_wait_ends(registry):
    waiting = [0]

    def count(delta: int) -> None:
        waiting[0] += delta

    flight: SingleFlight[str, int] = SingleFlight(registry.spawn, waiting=count)
    fetch = GatedFetch(1)
    patient = [asyncio.ensure_future(flight.run("k", fetch, timeout_s=30)) for _ in range(4)]
    cancelled = [asyncio.ensure_future(flight.run("k", fetch, timeout_s=30)) for _ in range(3)]
    hasty = [asyncio.ensure_future(flight.run("k", fetch, timeout_s=0.01)) for _ in range(3)]
    await asyncio.sleep(0)
    assert waiting[0] == 10
    for task in cancelled:
        task.cancel()
    await asyncio.gather(*cancelled, return_exceptions=True)
    assert waiting[0] == 7
    async with asyncio.timeout(5):
        results = await asyncio.gather(*hasty, return_exceptions=True)
    assert all(isinstance(r, FlightTimeout) for r in results)
    assert waiting[0] == 4
    fetch.gate.set()
    async with asyncio.timeout(5):
        assert [v for v, _ in await asyncio.gather(*patient)] == [1] * 4
    assert waiting[0] == 0

    async def stuck() -> int:
        await asyncio.Event().wait()
        return 0

    herd = [asyncio.ensure_future(flight.run("s", stuck)) for _ in range(5)]
    await asyncio.sleep(0)
    assert waiting[0] == 5
    for task in flight.tasks():
        task.cancel()
    await asyncio.gather(*herd, return_exceptions=True)
    assert waiting[0] == 0
