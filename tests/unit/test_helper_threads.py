"""HelperThreads: the other threads are SCHED_BATCH while gRPC calls crowd in, normal otherwise."""

from __future__ import annotations

import asyncio
import os
import threading
import time
from collections.abc import Iterator

import pytest

from gateway import helper_threads
from gateway.helper_threads import (
    BUSY_SAMPLES,
    CONCURRENT_CALLS,
    QUIET_SAMPLES,
    RESWEEP_SAMPLES,
    SAMPLE_S,
    WINDOW,
    HelperThreads,
    LinuxThreads,
    batch_available,
    other_threads,
)
from tests.fakes.clock import FakeClock

linux_only = pytest.mark.skipif(not batch_available(), reason="SCHED_BATCH is Linux only")


class RecordingPolicy:
    """Records each switch instead of changing a thread."""

    def __init__(self) -> None:
        self.applied: list[bool] = []

    def apply(self, batch: bool) -> int:
        self.applied.append(batch)
        return 1


class Calls:
    """The calls in flight each sample sees, set by the test."""

    def __init__(self) -> None:
        self.now = 0

    def __call__(self) -> int:
        return self.now


def helpers() -> tuple[HelperThreads, Calls, RecordingPolicy]:
    calls, policy = Calls(), RecordingPolicy()
    return HelperThreads(calls, policy), calls, policy


def samples(h: HelperThreads, calls: Calls, *seen: int) -> list[bool]:
    """One sample per value of calls in flight; whether batched after each."""
    out = []
    for n in seen:
        calls.now = n
        out.append(h.sample())
    return out


def test_one_caller_never_switches_anything() -> None:
    h, calls, policy = helpers()
    samples(h, calls, *[1, 0] * (5 * WINDOW))
    assert policy.applied == []


def test_batched_once_enough_samples_of_the_window_saw_calls_overlap() -> None:
    h, calls, policy = helpers()
    overlap, alone = CONCURRENT_CALLS, CONCURRENT_CALLS - 1
    # BUSY_SAMPLES - 1 overlapping samples, spread over the window: not yet.
    assert not any(samples(h, calls, *([overlap] + [alone] * 2) * (BUSY_SAMPLES - 1)))
    assert policy.applied == []
    assert samples(h, calls, overlap) == [True]
    assert policy.applied == [True]


def test_overlaps_further_apart_than_the_window_never_switch() -> None:
    h, calls, policy = helpers()
    gap = [0] * (WINDOW // (BUSY_SAMPLES - 1))
    samples(h, calls, *[CONCURRENT_CALLS, *gap] * (4 * BUSY_SAMPLES))
    assert policy.applied == []


def test_normal_again_only_after_enough_samples_in_a_row_without_overlap() -> None:
    h, calls, policy = helpers()
    samples(h, calls, *[CONCURRENT_CALLS] * BUSY_SAMPLES)
    assert h.batched
    # Overlap at one sample in QUIET_SAMPLES keeps them batched (a busy server on a crowded
    # CPU shows two calls at once only now and then).
    assert all(samples(h, calls, *([1] * (QUIET_SAMPLES - 1) + [CONCURRENT_CALLS]) * 3))
    assert all(samples(h, calls, *[1] * (QUIET_SAMPLES - 1)))
    assert samples(h, calls, 0) == [False]
    assert policy.applied[-1] is False
    assert False not in policy.applied[:-1]  # (with the sweeps made while batched)
    switches = len(policy.applied)
    samples(h, calls, *[0, 1] * QUIET_SAMPLES)  # already normal: nothing more to switch
    assert len(policy.applied) == switches


def test_while_batched_threads_started_since_are_covered() -> None:
    h, calls, policy = helpers()
    samples(h, calls, *[CONCURRENT_CALLS] * BUSY_SAMPLES)
    samples(h, calls, *[CONCURRENT_CALLS] * (2 * RESWEEP_SAMPLES))
    assert policy.applied == [True, True, True]  # each sweep batches the threads still normal


async def test_run_samples_each_period_and_leaves_the_threads_normal_when_cancelled() -> None:
    h, calls, policy = helpers()
    clock = FakeClock()
    task = asyncio.create_task(h.run(clock.sleep))
    await asyncio.sleep(0)
    calls.now = CONCURRENT_CALLS
    for _ in range(BUSY_SAMPLES - 1):
        clock.advance(SAMPLE_S)
        await asyncio.sleep(0)
    assert policy.applied == []
    clock.advance(SAMPLE_S / 2)
    await asyncio.sleep(0)
    assert policy.applied == []  # samples come a period apart
    clock.advance(SAMPLE_S / 2)
    await asyncio.sleep(0)
    assert policy.applied == [True]
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert policy.applied == [True, False]
    assert h.batched is False
    assert clock.sleepers == 0


async def test_run_cancelled_while_normal_switches_nothing() -> None:
    h, _, policy = helpers()
    clock = FakeClock()
    task = asyncio.create_task(h.run(clock.sleep))
    clock.advance(SAMPLE_S)
    await asyncio.sleep(0)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert policy.applied == []


# ----------------------------------------------------------------- real threads (Linux)
@pytest.fixture
def parked_thread() -> Iterator[int]:
    """A thread of this process waiting on an event; yields its id and ends it after."""
    release, ready = threading.Event(), threading.Event()
    tid: list[int] = []

    def park() -> None:
        tid.append(threading.get_native_id())
        ready.set()
        release.wait(timeout=30)

    thread = threading.Thread(target=park, daemon=True)
    thread.start()
    assert ready.wait(timeout=10)
    yield tid[0]
    release.set()
    thread.join(timeout=10)


@linux_only
def test_a_real_thread_is_batched_and_back_and_the_caller_never(parked_thread: int) -> None:
    own = threading.get_native_id()
    own_before = os.sched_getscheduler(own)
    threads = LinuxThreads(lambda: [parked_thread])
    try:
        assert threads.apply(True) == 1
        assert os.sched_getscheduler(parked_thread) == os.SCHED_BATCH
        assert threads.apply(True) == 0  # already batched
        assert os.sched_getscheduler(own) == own_before
    finally:
        assert threads.apply(False) == 1
    assert os.sched_getscheduler(parked_thread) == os.SCHED_OTHER


@linux_only
def test_a_thread_given_another_policy_keeps_it(parked_thread: int) -> None:
    os.sched_setscheduler(parked_thread, os.SCHED_IDLE, os.sched_param(0))
    threads = LinuxThreads(lambda: [parked_thread])
    assert threads.apply(True) == 0
    assert threads.apply(False) == 0
    assert os.sched_getscheduler(parked_thread) == os.SCHED_IDLE


@linux_only
def test_a_thread_that_exited_is_skipped() -> None:
    done: list[int] = []
    thread = threading.Thread(target=lambda: done.append(threading.get_native_id()))
    thread.start()
    thread.join(timeout=10)
    for _ in range(1000):  # join returns before the kernel thread is gone
        if not os.path.exists(f"/proc/self/task/{done[0]}"):
            break
        time.sleep(0.001)
    assert LinuxThreads(lambda: done).apply(True) == 0


@linux_only
def test_other_threads_lists_the_process_threads_but_the_given_one(parked_thread: int) -> None:
    own = threading.get_native_id()
    tids = other_threads(own)
    assert parked_thread in tids
    assert own not in tids


def test_without_the_policy_nothing_is_available_or_changed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(helper_threads, "_BATCH", None)
    assert batch_available() is False
    assert LinuxThreads(lambda: [threading.get_native_id()]).apply(True) == 0
