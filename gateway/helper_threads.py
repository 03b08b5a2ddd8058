"""While gRPC calls crowd in, the process's other threads stop preempting the event loop's thread.

Why: grpc.aio's poller thread (and grpc core's threads) wake up for the completions of every
call. On a CPU the loop's thread shares with them, each wakeup preempts the loop in the middle
of a request: with the daemon on one CPU, about 4.5 preemptions of the loop per cached gRPC
answer, each switch back running the answer's Python on cold caches. As SCHED_BATCH threads
(Linux; the same nice level and CPU share, no privilege needed) they do not preempt on wakeup:
they run when the loop waits or at the next tick and handle several completions per wakeup.

Only while calls overlap: a SCHED_BATCH poller also waits behind whatever else holds the CPU,
and with one caller the loop is idle, waiting for that very poller, so batching would only add
latency there. The server pulls calls from grpc's core one at a time, so however many callers
wait, Python sees few calls in flight: one caller never shows two, while 16 or 64 callers show
two or more at about half the samples. `HelperThreads` samples them every `SAMPLE_S` and makes
the other threads SCHED_BATCH when `BUSY_SAMPLES` of the last `WINDOW` samples saw calls
overlap, normal again after `QUIET_SAMPLES` samples in a row without (1 s); while batched it
also covers threads started since. The daemon entry runs it (`LISTEN__GRPC_BATCH_THREADS`);
tests, which start many Apps in one process, do not.
"""

from __future__ import annotations

import logging
import os
from collections import deque
from collections.abc import Awaitable, Callable, Iterable
from typing import Protocol

_log = logging.getLogger("lakegate.app")

CONCURRENT_CALLS = 2
"""gRPC calls in flight at one sample that show calls overlapping (one caller never does)."""

WINDOW = 8
"""Samples the decision to batch looks back on."""

BUSY_SAMPLES = 3
"""Samples of the window showing overlapping calls that make the other threads SCHED_BATCH."""

QUIET_SAMPLES = 40
"""Samples in a row without overlap that make them normal again: slower than the switch on,
as a busy server on a crowded CPU can go 7 samples without showing two calls at once."""

SAMPLE_S = 0.025
"""Seconds between two samples."""

RESWEEP_SAMPLES = 20
"""While batched, every this many samples threads started since are batched too."""

_BATCH: int | None = getattr(os, "SCHED_BATCH", None)
_NORMAL: int | None = getattr(os, "SCHED_OTHER", None)


def batch_available() -> bool:
    """Whether this platform has SCHED_BATCH and per-thread scheduling (Linux)."""
    return (_BATCH is not None and _NORMAL is not None
            and hasattr(os, "sched_setscheduler") and os.path.isdir("/proc/self/task"))


class ThreadPolicy(Protocol):
    """Sets the scheduling policy of the threads `HelperThreads` manages."""

    def apply(self, batch: bool) -> int:
        """Make the threads SCHED_BATCH (or normal again); returns how many changed."""
        ...


def other_threads(own_tid: int) -> list[int]:
    """The ids of this process's threads but `own_tid` (none where /proc is unreadable)."""
    try:
        names = os.listdir("/proc/self/task")
    except OSError:
        return []
    return [int(name) for name in names if name.isdigit() and int(name) != own_tid]


class LinuxThreads:
    """The SCHED_OTHER <-> SCHED_BATCH switch of every thread `threads()` lists (Linux).

    Only a thread in the policy switched from is changed: one another policy was given to
    (SCHED_IDLE, a real-time one) keeps it. A thread that exited meanwhile is skipped.

    Args:
        threads: the thread ids to switch, listed at every `apply` (so new threads count);
            the daemon passes every thread but the loop's.
    """

    def __init__(self, threads: Callable[[], Iterable[int]]) -> None:
        self._threads = threads

    def apply(self, batch: bool) -> int:
        if _BATCH is None or _NORMAL is None:
            return 0
        old, new = (_NORMAL, _BATCH) if batch else (_BATCH, _NORMAL)
        changed = 0
        for tid in self._threads():
            try:
                if os.sched_getscheduler(tid) != old:
                    continue
                os.sched_setscheduler(tid, new, os.sched_param(0))
            except OSError:
                continue  # exited meanwhile, or refused: it keeps its policy
            changed += 1
        return changed


class HelperThreads:
    """Samples the gRPC calls in flight and switches the other threads' policy with hysteresis.

    Args:
        calls_in_flight: the gRPC calls the server is handling now.
        policy: switches the threads (`LinuxThreads`; tests record instead).
    """

    def __init__(self, calls_in_flight: Callable[[], int], policy: ThreadPolicy) -> None:
        self._calls = calls_in_flight
        self._policy = policy
        self._window: deque[bool] = deque(maxlen=WINDOW)
        self._quiet = 0  # samples in a row without overlap
        self._since_sweep = 0
        self.batched = False

    def sample(self) -> bool:
        """One sample: switch if due; returns whether the other threads are batched now."""
        overlap = self._calls() >= CONCURRENT_CALLS
        self._window.append(overlap)
        self._quiet = 0 if overlap else self._quiet + 1
        if not self.batched:
            if sum(self._window) >= BUSY_SAMPLES:
                changed = self._policy.apply(True)
                self.batched, self._since_sweep = True, 0
                _log.debug("helper threads batched", extra={"threads": changed})
        elif self._quiet >= QUIET_SAMPLES:
            self.restore()
        else:
            self._since_sweep += 1
            if self._since_sweep >= RESWEEP_SAMPLES:  # threads started since, by one normal
                self._policy.apply(True)
                self._since_sweep = 0
        return self.batched

    def restore(self) -> None:
        """Make the other threads normal again (when idle, and on shutdown)."""
        if self.batched:
            changed = self._policy.apply(False)
            self.batched = False
            _log.debug("helper threads normal", extra={"threads": changed})

    async def run(self, sleep: Callable[[float], Awaitable[None]]) -> None:
        """Sample every `SAMPLE_S` until cancelled; the threads end normal whatever ends it."""
        try:
            while True:
                await sleep(SAMPLE_S)
                self.sample()
        finally:
            self.restore()
