"""Runs one `LoadSpec` across several worker processes that start together.

Workers are spawned (not forked: grpc and event loops do not survive fork), each opens its
connections, then all of them and the parent meet at a `multiprocessing.Barrier`; only then does
the load begin, so connection set-up is never part of a measurement. Workers pin themselves to
`spec.cpus` when given. Every worker is joined with a timeout and terminated (by its own
Process handle) if it overstays.
"""

from __future__ import annotations

import asyncio
import multiprocessing as mp
import os
import queue as queue_mod
import time
from multiprocessing.synchronize import Barrier
from typing import Any

from loadtest.loadgen import GrpcCaller, HttpCaller, open_connections, run_burst, run_closed, run_open
from loadtest.spec import LoadResult, LoadSpec

_SETUP_TIMEOUT_S = 90.0
_GRPC_CHANNELS_PER_WORKER = 2


class LoadRunError(RuntimeError):
    """A worker failed to set up or to report within its time cap."""


def run_load(spec: LoadSpec) -> LoadResult:
    """Run `spec` in `spec.processes` worker processes and merge their results.

    Raises:
        LoadRunError: if a worker fails before the start or does not report in time.
    """
    ctx = mp.get_context("spawn")
    barrier = ctx.Barrier(spec.processes + 1)
    results: Any = ctx.Queue()
    procs = [ctx.Process(target=worker_main, args=(spec.share(i), barrier, results), daemon=True)
             for i in range(spec.processes)]
    for proc in procs:
        proc.start()
    merged = LoadResult()
    try:
        try:
            barrier.wait(timeout=_SETUP_TIMEOUT_S)
        except Exception as exc:  # BrokenBarrierError: a worker could not set up
            raise LoadRunError(f"load workers failed to start: {_drain_errors(results)}") from exc
        deadline = time.monotonic() + spec.warmup_s + spec.bounds.max_duration_s + 60.0
        for _ in procs:
            try:
                status, payload = results.get(timeout=max(1.0, deadline - time.monotonic()))
            except queue_mod.Empty as exc:
                raise LoadRunError("a load worker did not report before its time cap") from exc
            if status != "ok":
                raise LoadRunError(f"load worker failed: {payload}")
            merged.merge(payload)
    finally:
        for proc in procs:
            proc.join(timeout=10)
            if proc.is_alive():
                proc.terminate()
                proc.join(timeout=5)
    return merged


def _drain_errors(results: Any) -> str:
    errors = []
    for _ in range(16):
        try:
            status, payload = results.get(timeout=0.5)
        except queue_mod.Empty:
            break
        if status != "ok":
            errors.append(str(payload))
    return "; ".join(errors) or "unknown"


def worker_main(spec: LoadSpec, barrier: Barrier, results: Any) -> None:
    """Entry point of one worker process (module-level so that spawn can import it)."""
    if spec.cpus:
        os.sched_setaffinity(0, spec.cpus)
    try:
        if spec.protocol == "http":
            import uvloop

            result = uvloop.run(_work(spec, barrier))
        else:
            # grpc.aio brings its own poller; uvloop makes no difference there (devstack notes).
            result = asyncio.run(_work(spec, barrier))
        results.put(("ok", result))
    except BaseException as exc:
        barrier.abort()
        results.put(("error", f"{type(exc).__name__}: {str(exc)[:300]}"))
        raise


async def _work(spec: LoadSpec, barrier: Barrier) -> LoadResult:
    caller: HttpCaller | GrpcCaller
    if spec.protocol == "http":
        caller = HttpCaller(spec, await open_connections(spec.target, spec.concurrency))
    else:
        caller = await GrpcCaller.create(spec, _GRPC_CHANNELS_PER_WORKER)
    try:
        # Blocking here is fine: nothing else runs on this loop before the start.
        barrier.wait(timeout=_SETUP_TIMEOUT_S)
        start = time.perf_counter()
        if spec.mode == "closed":
            result = await run_closed(spec, caller.call, start)
        elif spec.mode == "open":
            result = await run_open(spec, caller.call, start)
        else:
            result = await run_burst(spec, caller.call, start)
        result.outcomes = dict(caller.outcomes)
        return result
    finally:
        await caller.close()
