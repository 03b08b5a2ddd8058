"""The async load loops one worker process runs: closed loop, open loop, burst, and a closed
loop that alternates between two servers (paired).

Latency is recorded from the moment a request was *due* (open loop: its scheduled arrival time),
not from when the generator got round to sending it, so a stalled server cannot hide queueing
(no coordinated omission). Every loop stops at its request cap or its time cap.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable, Callable
from typing import Any

from loadtest.rawhttp import RawHttpConnection, RawHttpError
from loadtest.spec import LoadResult, LoadSpec

Call = Callable[[], Awaitable[None]]
_CONNECT_BATCH = 100
_CONNECT_DEADLINE_S = 60.0
_CALL_TIMEOUT_S = 30.0


class RequestFailedError(Exception):
    """A request got an unexpected status or no answer."""


async def open_connections(target: str, n: int) -> list[RawHttpConnection]:
    """Open `n` keep-alive connections in batches, retrying while the server's accept backlog
    is full (a CPU-starved server accepts slowly); bounded by `_CONNECT_DEADLINE_S`."""
    conns: list[RawHttpConnection] = []
    deadline = time.monotonic() + _CONNECT_DEADLINE_S
    while len(conns) < n and time.monotonic() < deadline:
        batch = min(n - len(conns), _CONNECT_BATCH)
        results = await asyncio.gather(
            *(RawHttpConnection.open(target) for _ in range(batch)), return_exceptions=True
        )
        opened = [r for r in results if isinstance(r, RawHttpConnection)]
        conns.extend(opened)
        if len(opened) < batch:
            await asyncio.sleep(0.05)  # let the server drain its accept queue
    if len(conns) < n:
        for conn in conns:
            conn.close()
        raise RequestFailedError(f"could only open {len(conns)} of {n} connections to server")
    return conns


class HttpCaller:
    """Issues the spec's prebuilt HTTP request over a pool of raw connections."""

    def __init__(self, spec: LoadSpec, conns: list[RawHttpConnection]) -> None:
        self._spec = spec
        self._idle: asyncio.Queue[RawHttpConnection] = asyncio.Queue()
        for conn in conns:
            self._idle.put_nowait(conn)
        self.outcomes: dict[str, int] = {}

    async def call(self) -> None:
        conn = await self._idle.get()
        try:
            if conn.closed:
                conn = await RawHttpConnection.open(self._spec.target)
            status, body = await conn.request(self._spec.payload)
        except (RawHttpError, OSError) as exc:
            conn.close()
            raise RequestFailedError(type(exc).__name__ + ": " + str(exc)[:120]) from exc
        finally:
            self._idle.put_nowait(conn)
        if status != self._spec.expect_status:
            raise RequestFailedError(f"HTTP {status}: {body[:160]!r}")
        if self._spec.count_outcomes:
            outcome = str(json.loads(body).get("outcome", "?"))
            self.outcomes[outcome] = self.outcomes.get(outcome, 0) + 1

    async def close(self) -> None:
        while not self._idle.empty():
            self._idle.get_nowait().close()


class GrpcCaller:
    """Issues the spec's serialised request as a raw-bytes unary gRPC call (no proto parsing
    on the generator side, so the generator stays cheap)."""

    def __init__(self, spec: LoadSpec, channels: list[Any]) -> None:
        self._calls = [ch.unary_unary(spec.grpc_method) for ch in channels]
        self._channels = channels
        self._payload = spec.payload
        self._next = 0
        self.outcomes: dict[str, int] = {}

    @classmethod
    async def create(cls, spec: LoadSpec, n_channels: int) -> GrpcCaller:
        import grpc

        channels = [grpc.aio.insecure_channel(spec.target) for _ in range(n_channels)]
        for ch in channels:
            await asyncio.wait_for(ch.channel_ready(), timeout=10)
        return cls(spec, channels)

    async def call(self) -> None:
        import grpc

        self._next = (self._next + 1) % len(self._calls)
        try:
            await self._calls[self._next](self._payload, timeout=30)
        except grpc.aio.AioRpcError as exc:
            raise RequestFailedError(f"gRPC {exc.code().name}: {exc.details()}") from exc

    async def close(self) -> None:
        for ch in self._channels:
            await ch.close()


async def run_closed(spec: LoadSpec, call: Call, start_s: float) -> LoadResult:
    """`spec.concurrency` users, each sending its next request when the previous one returns."""
    result = LoadResult()
    end = await _closed_users(spec, start_s, lambda _t0: (call, result))
    result.elapsed_s = max(1e-9, end - (start_s + spec.warmup_s))
    return result


async def run_paired(
    spec: LoadSpec, calls: tuple[Call, Call], start_s: float
) -> tuple[LoadResult, LoadResult]:
    """A closed loop that alternates between two servers every `spec.slice_s`: each request
    goes to the side whose slice it starts in, and each side's req/s is its requests over its
    own slices' time.

    Two back-to-back runs meet the machine in two states: a neighbour's burst or a host
    hiccup of a second lands on one side of the pair, and with one caller the ratio of such a
    pair moved by 0.2 either way. Slices a few tenths of a second long spread that across both
    sides, so the pair's ratio is the servers' and not the moment's. A request in flight when
    its slice ends finishes there (it counts for the side it started on), and the next one
    goes to the other side.
    """
    sides = (LoadResult(), LoadResult())

    def route(t0: float) -> tuple[Call, LoadResult]:
        side = int((t0 - start_s) / spec.slice_s) % 2
        return calls[side], sides[side]

    end = await _closed_users(spec, start_s, route)
    for k, result in enumerate(sides):
        result.elapsed_s = max(
            1e-9, slice_time(start_s, spec.slice_s, start_s + spec.warmup_s, end, k))
    return sides


async def _closed_users(
    spec: LoadSpec, start_s: float, route: Callable[[float], tuple[Call, LoadResult]]
) -> float:
    """`spec.concurrency` users, each sending its next request when the previous one returns,
    to the call (and into the result) `route` picks for the moment the request starts; answers
    during the warm-up are counted apart and dropped. Returns the end of the measured window."""
    warm = LoadResult()
    record_from = start_s + spec.warmup_s
    stop_at = record_from + spec.bounds.max_duration_s
    issued = 0  # measured requests started; counted before the await so the cap is exact

    async def user() -> None:
        nonlocal issued
        while True:
            t0 = time.perf_counter()
            if t0 >= stop_at or issued >= spec.bounds.max_requests:
                return
            call, sink = route(t0)
            if t0 < record_from:
                sink = warm
            else:
                issued += 1
            if await _timed(call, sink) and sink is not warm:
                sink.hist.record_s(time.perf_counter() - t0)

    await asyncio.gather(*(user() for _ in range(spec.concurrency)))
    return min(time.perf_counter(), stop_at)


def slice_time(start_s: float, slice_s: float, a: float, b: float, side: int) -> float:
    """Seconds of [a, b) that fall in `side`'s slices (side 0 owns slices 0, 2, 4, ... after
    `start_s`, side 1 the odd ones)."""
    total = 0.0
    i = max(0, int((a - start_s) // slice_s))
    while start_s + i * slice_s < b:
        if i % 2 == side:
            lo = max(a, start_s + i * slice_s)
            hi = min(b, start_s + (i + 1) * slice_s)
            total += max(0.0, hi - lo)
        i += 1
    return total


async def run_open(spec: LoadSpec, call: Call, start_s: float) -> LoadResult:
    """Arrivals at a fixed rate, whatever the server's speed, up to the caps.

    Request i is due at `start_s + i / rate`; `spec.concurrency` pacers take every n-th one
    (wrk2's per-connection pacing): a pacer sends each request when it is due, or at once if
    its previous answer came late, and its latency counts from when it was due, so a stalled
    server still shows its full delay (no coordinated omission). No task per request: at
    tens of thousands of arrivals a second a task, a semaphore and a timer per request made
    the generator's own CPU the tail the bench measured.
    """
    result = LoadResult()
    warm_sink = LoadResult()
    rate = spec.rate_per_s
    total = min(
        spec.bounds.max_requests,
        int((spec.warmup_s + spec.bounds.max_duration_s) * rate),
    )
    warm = int(spec.warmup_s * rate)
    pacers = max(1, min(spec.concurrency, total))

    async def pacer(first: int) -> None:
        for i in range(first, total, pacers):
            due = start_s + i / rate
            delay = due - time.perf_counter()
            if delay > 0:
                await asyncio.sleep(delay)
            measured = i >= warm
            if await _timed(call, result if measured else warm_sink) and measured:
                result.hist.record_s(time.perf_counter() - due)

    runs = [asyncio.ensure_future(pacer(k)) for k in range(pacers)]
    _, late = await asyncio.wait(runs, timeout=total / rate + spec.bounds.max_duration_s + 30)
    for run in late:
        run.cancel()
    result.elapsed_s = max(1e-9, (total - warm) / rate)
    return result


async def run_burst(spec: LoadSpec, call: Call, start_s: float) -> LoadResult:
    """Exactly `concurrency` requests released together."""
    result = LoadResult()

    async def one() -> None:
        t0 = time.perf_counter()
        if await _timed(call, result):
            result.hist.record_s(time.perf_counter() - t0)

    n = min(spec.concurrency, spec.bounds.max_requests)
    await asyncio.wait_for(
        asyncio.gather(*(one() for _ in range(n))), timeout=spec.bounds.max_duration_s
    )
    result.elapsed_s = time.perf_counter() - start_s
    return result


async def _timed(call: Call, result: LoadResult) -> bool:
    try:
        async with asyncio.timeout(_CALL_TIMEOUT_S):
            await call()
    except (RequestFailedError, TimeoutError) as exc:
        result.errors += 1
        if len(result.error_samples) < 5:
            result.error_samples.append(str(exc) or type(exc).__name__)
        return False
    result.requests += 1
    return True
