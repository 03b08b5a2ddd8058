"""The load loops stop at their request cap, and the paired loop splits its time between two
servers (loadtest/loadgen.py), with in-memory calls."""

from __future__ import annotations

import asyncio
import time
from dataclasses import replace

from loadtest.bounds import Bounds
from loadtest.loadgen import (
    RequestFailedError,
    run_burst,
    run_closed,
    run_open,
    run_paired,
    slice_time,
)
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


def _spec(
    mode: str, conc: int, bounds: Bounds, rate: float = 0.0, slice_s: float = 0.0
) -> LoadSpec:
    return LoadSpec(
        "http", "unix:/unused", b"", mode, conc, bounds, rate_per_s=rate,  # type: ignore[arg-type]
        pair_target="unix:/other" if mode == "paired" else "", slice_s=slice_s,
    )


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


class Server:
    """A fake server whose answers take `latency_s`, `slowdown` times longer while the shared
    `Machine` is stalled (a neighbour's burst: it hits whichever server runs then)."""

    def __init__(self, latency_s: float, machine: Machine) -> None:
        self.latency_s, self.machine = latency_s, machine
        self.calls = 0
        self.started: list[float] = []

    async def __call__(self) -> None:
        self.calls += 1
        self.started.append(time.perf_counter())
        await asyncio.sleep(self.latency_s * self.machine.factor())


class Machine:
    def __init__(self, stall_from: float, stall_to: float, slowdown: float) -> None:
        self.stall_from, self.stall_to, self.slowdown = stall_from, stall_to, slowdown

    def factor(self) -> float:
        now = time.perf_counter()
        return self.slowdown if self.stall_from <= now < self.stall_to else 1.0


def _started_in_side(t: float, side: int, slice_s: float, lag_s: float) -> bool:
    """`t` falls in one of `side`'s slices, or at most `lag_s` into the slice after one."""
    k = int(t / slice_s)
    late = k > 0 and t - k * slice_s <= lag_s
    return k % 2 == side or (late and (k - 1) % 2 == side)


async def test_paired_loop_gives_each_server_the_requests_started_in_its_slices() -> None:
    start = time.perf_counter()
    machine = Machine(0.0, 0.0, 1.0)
    fast, slow = Server(0.004, machine), Server(0.012, machine)
    spec = _spec("paired", 2, Bounds(10**6, 0.4), slice_s=0.05)
    a, b = await run_paired(spec, (fast, slow), start)
    assert (a.requests, b.requests) == (fast.calls, slow.calls)
    assert a.hist.total == a.requests
    assert b.hist.total == b.requests
    # Every request went to the side whose slice it started in. A fake records its start a
    # moment after the loop routed it, and a preempted test process can carry that moment
    # past the slice's end; 20 ms of such lag is allowed, well under the 50 ms slice.
    assert all(_started_in_side(t - start, 0, 0.05, 0.02) for t in fast.started)
    assert all(_started_in_side(t - start, 1, 0.05, 0.02) for t in slow.started)
    assert abs(a.elapsed_s - 0.2) < 1e-6
    assert abs(b.elapsed_s - 0.2) < 1e-6
    # 3x faster answers, 3x the req/s (a loaded machine's late wake-ups narrow it a little)
    assert 1.8 <= a.rps / b.rps <= 4.0


async def test_a_stall_of_the_machine_lands_on_both_sides_of_a_pair() -> None:
    # The machine is 3x slower for the middle half of the run. Back to back, it would fall
    # on one server's run and make a 3x ratio look like 1x or 9x; alternating every 0.1 s,
    # both servers share it and the ratio stays near 3.
    start = time.perf_counter()
    machine = Machine(start + 0.2, start + 0.6, 3.0)
    fast, slow = Server(0.004, machine), Server(0.012, machine)
    spec = _spec("paired", 2, Bounds(10**6, 0.8), slice_s=0.1)
    a, b = await run_paired(spec, (fast, slow), start)
    assert 1.8 <= a.rps / b.rps <= 4.5


async def test_paired_loop_drops_its_warm_up_and_stops_at_the_request_cap() -> None:
    machine = Machine(0.0, 0.0, 1.0)
    one, two = Server(0.0, machine), Server(0.0, machine)
    spec = replace(_spec("paired", 4, Bounds(300, 60.0), slice_s=0.001), warmup_s=0.01)
    a, b = await run_paired(spec, (one, two), time.perf_counter())
    assert a.requests + b.requests == 300
    assert one.calls + two.calls > 300  # the warm-up's answers were made and not counted
    assert a.requests > 0
    assert b.requests > 0


def test_slice_time_counts_each_sides_share_of_a_window() -> None:
    # Slices of 0.2 s from t=0; side 0 owns [0, 0.2), [0.4, 0.6), ...
    assert abs(slice_time(0.0, 0.2, 0.5, 3.5, 0) - 1.5) < 1e-9
    assert abs(slice_time(0.0, 0.2, 0.5, 3.5, 1) - 1.5) < 1e-9
    assert abs(slice_time(0.0, 0.2, 0.1, 0.3, 0) - 0.1) < 1e-9
    assert abs(slice_time(0.0, 0.2, 0.1, 0.3, 1) - 0.1) < 1e-9
    assert abs(slice_time(10.0, 0.2, 10.25, 10.35, 0)) < 1e-9  # wholly in side 1's slice
    assert abs(slice_time(10.0, 0.2, 10.25, 10.35, 1) - 0.1) < 1e-9
