"""Runs one `LoadSpec` across several worker processes that start together.

Workers are spawned (not forked: grpc and event loops do not survive fork), each opens its
connections and reports "ready"; once every worker is ready the parent opens the start gate (a
`multiprocessing.Event`, i.e. a start barrier that also notices a worker dying during set-up),
so connection set-up is never part of a measurement. Workers pin themselves to
`spec.cpus` when given. Every worker is joined with a timeout and terminated (by its own
Process handle) if it overstays.
"""

from __future__ import annotations

import asyncio
import multiprocessing as mp
import os
import queue as queue_mod
import time
from collections.abc import Callable, Sequence
from multiprocessing.synchronize import Event
from typing import Any

from loadtest.loadgen import (
    GrpcCaller,
    HttpCaller,
    open_connections,
    run_burst,
    run_closed,
    run_open,
    run_paired,
)
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
    if spec.mode == "paired":
        raise ValueError("a paired run has two results: use run_pair")
    merged = LoadResult()
    for part in _run_shares(spec):
        merged.merge(part)
    return merged


def run_pair(spec: LoadSpec) -> tuple[LoadResult, LoadResult]:
    """Run a paired `spec` (`spec.target` and `spec.pair_target` alternating, every worker
    on the same slice schedule) and merge each side's results across the workers.

    Raises:
        LoadRunError: if a worker fails before the start or does not report in time.
    """
    if spec.mode != "paired":
        raise ValueError(f"run_pair needs a paired spec, got mode {spec.mode!r}")
    first, second = LoadResult(), LoadResult()
    for a, b in _run_shares(spec):
        first.merge(a)
        second.merge(b)
    return first, second


def _run_shares(spec: LoadSpec) -> list[Any]:
    """Each worker process's result of its share of `spec`."""
    shares = [spec.share(i) for i in range(spec.processes)]
    return run_processes(worker_main, shares, spec.warmup_s + spec.bounds.max_duration_s)


def run_processes(
    target: Callable[[Any, Event, Any], None], shares: Sequence[Any], run_s: float
) -> list[Any]:
    """Start one spawned process per share, open the start gate once all report "ready",
    and collect one result per process (bounded by `run_s` + 60 s).

    `target(share, gate, results)` must put ("ready", None), wait on the gate, then put
    ("ok", result) or ("error", message).

    Raises:
        LoadRunError: if a worker fails or overstays.
    """
    ctx = mp.get_context("spawn")
    gate = ctx.Event()
    results: Any = ctx.Queue()
    procs = [
        ctx.Process(target=target, args=(share, gate, results), daemon=True) for share in shares
    ]
    for proc in procs:
        proc.start()
    collected: list[Any] = []
    try:
        _await_ready(procs, results)
        gate.set()
        deadline = time.monotonic() + run_s + 60.0
        for _ in procs:
            try:
                status, payload = results.get(timeout=max(1.0, deadline - time.monotonic()))
            except queue_mod.Empty as exc:
                raise LoadRunError("a load worker did not report before its time cap") from exc
            if status != "ok":
                raise LoadRunError(f"load worker failed: {payload}")
            collected.append(payload)
    finally:
        gate.set()  # never leave a worker waiting at the gate
        for proc in procs:
            proc.join(timeout=10)
            if proc.is_alive():
                proc.terminate()
                proc.join(timeout=5)
    return collected


def _await_ready(procs: list[Any], results: Any) -> None:
    ready = 0
    deadline = time.monotonic() + _SETUP_TIMEOUT_S
    while ready < len(procs):
        if time.monotonic() > deadline:
            raise LoadRunError("load workers did not get ready in time")
        try:
            status, payload = results.get(timeout=0.5)
        except queue_mod.Empty:
            if any(not p.is_alive() for p in procs):
                raise LoadRunError("a load worker died during set-up") from None
            continue
        if status != "ready":
            raise LoadRunError(f"load worker failed during set-up: {payload}")
        ready += 1


def worker_main(spec: LoadSpec, gate: Event, results: Any) -> None:
    """Entry point of one worker process (module-level so that spawn can import it)."""
    if spec.cpus:
        os.sched_setaffinity(0, spec.cpus)
    try:
        if spec.protocol == "http":
            import uvloop

            result = uvloop.run(_work(spec, gate, results))
        else:
            # grpc.aio brings its own poller; uvloop makes no difference there (devstack notes).
            result = asyncio.run(_work(spec, gate, results))
        results.put(("ok", result))
    except BaseException as exc:
        results.put(("error", f"{type(exc).__name__}: {str(exc)[:300]}"))
        raise


async def _work(
    spec: LoadSpec, gate: Event, results: Any
) -> LoadResult | tuple[LoadResult, LoadResult]:
    callers = [await _caller(spec)]
    try:
        if spec.mode == "paired":
            callers.append(await _caller(spec.other_side()))
        results.put(("ready", None))
        # Blocking here is fine: nothing else runs on this loop before the start.
        if not gate.wait(timeout=_SETUP_TIMEOUT_S):
            raise LoadRunError("start gate never opened")
        start = time.perf_counter()
        cpu0 = time.process_time()
        if spec.mode == "paired":
            sides = await run_paired(spec, (callers[0].call, callers[1].call), start)
            cpu = time.process_time() - cpu0
            for side, caller in zip(sides, callers, strict=True):
                # Both sides share this process: each is charged half of its CPU.
                side.client_cpu_s = cpu / 2
                side.outcomes = dict(caller.outcomes)
            return sides
        if spec.mode == "closed":
            result = await run_closed(spec, callers[0].call, start)
        elif spec.mode == "open":
            result = await run_open(spec, callers[0].call, start)
        else:
            result = await run_burst(spec, callers[0].call, start)
        result.client_cpu_s = time.process_time() - cpu0
        result.outcomes = dict(callers[0].outcomes)
        return result
    finally:
        for caller in callers:
            await caller.close()


async def _caller(spec: LoadSpec) -> HttpCaller | GrpcCaller:
    if spec.protocol == "http":
        n_conns = max(1, spec.concurrency) if spec.mode == "open" else spec.concurrency
        return HttpCaller(spec, await open_connections(spec.target, n_conns))
    return await GrpcCaller.create(spec, _GRPC_CHANNELS_PER_WORKER)
