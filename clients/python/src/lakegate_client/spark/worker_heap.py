"""Keep a reused Python worker's long-lived heap out of the collection PySpark runs per task.

Why: a reused PySpark worker runs a full ``gc.collect()`` after every task (``pyspark/daemon.py``),
and a full collection walks every tracked object. A data source task's worker holds pyspark's,
pyarrow's and boto3's modules and its staging client's S3 service model: some 98,000 objects,
where a worker writing Parquet with pyarrow alone holds 44,000. On the busy 2-core bench machine
walking them took 85-240 ms after each task, as long as a 500-row task's whole write (issue 36).
Those objects live as long as the worker, so ``gc.freeze()`` moves them to the permanent
generation and each later collection walks only what was made since.

What freezing costs: an object alive at a freeze is never reclaimed by the cyclic collector (it
is still freed by reference counting), so a reference cycle among frozen objects that later
becomes garbage stays until the worker exits. Hence a freeze only after a task made the worker
import something (the first task, or a later one that brought another format's library), never
after every task: what a task allocates and drops is collected as before.

The driver's side too (:func:`settling`): Spark runs a data source's ``writer()``, ``reader()``,
``schema()``, ``partitions()``, ``commit()`` and ``abort()`` in Python workers of the driver,
reused the same way, whose daemon collects after each call as well. Planning's collection ran
while the write's first tasks did: the Lance data source's first two tasks took 22 ms longer
than the direct write's on the 2-core bench node, its later ones no longer (issue 36).
"""

from __future__ import annotations

import gc
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from functools import lru_cache

REUSE_ENV = "SPARK_REUSE_WORKER"  # set by Spark in the daemon of reused Python workers


def settle() -> None:
    """After a task: freeze the worker's heap if this process imported modules since its last
    freeze. Nothing outside a reused PySpark worker (a worker that exits after one task would
    pay a full collection for nothing)."""
    if os.environ.get(REUSE_ENV):
        _freeze(os.getpid(), len(sys.modules))


@contextmanager
def settling(enabled: bool = True) -> Iterator[None]:
    """Run the body (one call of a driver-side method), then :func:`settle` (``enabled``: the
    source's ``freeze_worker_heap`` option), whether or not it raised."""
    try:
        yield
    finally:
        if enabled:
            settle()


@lru_cache(maxsize=4)
def _freeze(pid: int, modules: int) -> None:
    """Collect, then freeze, once per process and module count (the cache is the "once")."""
    del pid, modules  # the cache key only: a forked child and a new import each freeze again
    gc.collect()
    gc.freeze()
