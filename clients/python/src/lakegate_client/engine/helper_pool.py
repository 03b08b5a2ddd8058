"""One pool of helper threads per process, for the steps a write overlaps on the driver: its
planning (recovery and the Lance version beside the job intent's create) and the Lance ledger
cleanup beside the commit call.

Why a pool that stays: a ``ThreadPoolExecutor`` made per call starts its threads afresh, and
starting a thread waits until the new thread runs. On the busy 2-core bench node a write's
planning and its commit paid about 1 ms each for those starts, of a 0.3 s write (issue 36),
as the lease keeper's tasks once did (``job_intent.LeaseKeeper``). These threads are made once
and reused.

A forked child (PySpark forks its Python workers) gets a pool of its own: a parent's threads
do not survive a fork, and a pool that believes it has idle threads would never run its work.
Only steps that never wait on this pool go here (nothing submitted submits again), so a full
pool queues work and cannot deadlock.
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from functools import lru_cache

WORKERS = 4  # planning runs two steps at once, the commit one


def helpers() -> ThreadPoolExecutor:
    """This process's helper pool."""
    return _pool(os.getpid())


@lru_cache(maxsize=1)
def _pool(pid: int) -> ThreadPoolExecutor:
    """``pid``: the cache key only, so a forked child makes its own pool."""
    del pid
    return ThreadPoolExecutor(max_workers=WORKERS, thread_name_prefix="lakegate-helper")
