"""The load loops stop at their request cap (loadtest/loadgen.py), with an in-memory call."""

from __future__ import annotations

import asyncio
import time

from loadtest.bounds import Bounds
from loadtest.loadgen import RequestFailedError, run_burst, run_closed, run_open
from loadtest.spec import LoadSpec


class FakeCall:
    """An upstream-free request: yields to the loop, fails every `fail_every`-th call."""

    def __init__(self, fail_every: int = 0) -> None:
        self.calls = 0
        self.fail_every = fail_every

    async def __call__(self) -> None:
        self.calls += 1
        n = self.calls
        await asyncio.sleep(0)
        if self.fail_every and n % self.fail_every == 0:
            raise RequestFailedError("HTTP 503")


def _spec(mode: str, conc: int, bounds: Bounds, rate: float = 0.0) -> LoadSpec:
    return LoadSpec("http", "unix:/unused", b"", mode, conc, bounds, rate_per_s=rate)  # type: ignore[arg-type]


async def test_closed_loop_stops_exactly_at_the_request_cap() -> None:
    call = FakeCall(fail_every=10)
    result = await run_closed(_spec("closed", 8, Bounds(500, 60.0)), call, time.perf_counter())
    assert call.calls == 500
    assert (result.requests, result.errors) == (450, 50)
    assert result.hist.total == 450
    assert result.error_samples[0] == "HTTP 503"


async def test_closed_loop_stops_at_the_time_cap_when_requests_are_unbounded() -> None:
    call = FakeCall()
    result = await run_closed(_spec("closed", 2, Bounds(10**12, 0.05)), call, time.perf_counter())
    assert 0 < call.calls < 10**12
    assert result.requests == call.calls


async def test_open_loop_issues_rate_times_duration_arrivals() -> None:
    call = FakeCall()
    result = await run_open(
        _spec("open", 4, Bounds(10**6, 0.05), rate=1000.0), call, time.perf_counter()
    )
    assert call.calls == 50
    assert result.requests == 50


async def test_open_loop_request_cap_wins_over_rate() -> None:
    call = FakeCall()
    await run_open(_spec("open", 4, Bounds(7, 0.05), rate=1000.0), call, time.perf_counter())
    assert call.calls == 7


class StallOnce(FakeCall):
    """Answers at once, but the `stall_at`-th call takes `stall_s`."""

    def __init__(self, stall_at: int, stall_s: float) -> None:
        super().__init__()
        self.stall_at, self.stall_s = stall_at, stall_s

    async def __call__(self) -> None:
        self.calls += 1
        await asyncio.sleep(self.stall_s if self.calls == self.stall_at else 0)


async def test_open_loop_counts_latency_from_when_each_request_was_due() -> None:
    # One pacer, 1,000 arrivals/s for 0.1 s: the 50 ms stall of call 5 delays the ~50
    # requests due meanwhile; each counts from its due time (no coordinated omission), so
    # the tail shows the stall although each of those calls itself was instant.
    call = StallOnce(stall_at=5, stall_s=0.05)
    result = await run_open(
        _spec("open", 1, Bounds(10**6, 0.1), rate=1000.0), call, time.perf_counter()
    )
    assert call.calls == 100
    assert result.hist.percentile_ms(99) >= 40.0
    assert result.hist.percentile_ms(75) >= 10.0


async def test_burst_sends_exactly_k_requests() -> None:
    call = FakeCall()
    result = await run_burst(_spec("burst", 300, Bounds(300, 30.0)), call, time.perf_counter())
    assert call.calls == 300
    assert result.requests == 300
