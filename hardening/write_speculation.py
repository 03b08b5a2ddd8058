"""The write matrix's ``speculation`` case: a slowed task attempt overtaken by a speculative copy.

Why a cluster of two "hosts" and not ``local-cluster``: Spark's scheduler never launches a
speculative copy of a task on a host that already ran an attempt of it
(``TaskSetManager.hasAttemptOnHost``), and ``local[N]`` and ``local-cluster[N,C,M]`` run every
executor on one host, so there speculation never happens. Here a standalone cluster
(``devstack/spark_cluster.py``, ``distinct_hosts``) binds its two workers to 127.0.0.1 and
127.0.0.2, each worker with its own gateway.

One round: seed the table, then append with partition 0's FIRST attempt slowed
(``slow@0=<s>#once``) so that a speculative attempt 1 runs the same partition and wins; the slowed
attempt keeps running (``spark.python.task.killTimeout``) and finishes its file after the job has
committed, the late duplicate. Spark's own status store (the task list of the job's stages) says
whether a speculative attempt ran and which attempt of the partition succeeded. A try in which
no speculative attempt ran (the scheduler did not start one in time) is still judged, noted, and
repeated on a fresh table, up to ``TRIES`` times; a round with no speculating try at all proved
nothing and counts as an unexpected error.
"""

from __future__ import annotations

import os
import sys
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any
from unittest.mock import patch

if TYPE_CHECKING:
    from collections.abc import Iterator

    from pyspark.sql import SparkSession

    from devstack.stack_info import StackInfo

SLOW_S = 10.0  # attempt 0 of partition 0 lags this long after its last row
SPECULATION_CONF = {
    "spark.speculation": "true",
    "spark.speculation.interval": "100ms",
    "spark.speculation.quantile": "0.5",  # 2 of 4 tasks done...
    "spark.speculation.multiplier": "1.5",  # ...and partition 0 runs 1.5x their median
    "spark.speculation.minTaskRuntime": "1s",
    "spark.locality.wait": "0s",
    "spark.python.task.killTimeout": "30s",  # the killed duplicate finishes its file
}
SETTLE_TIMEOUT_S = SLOW_S + 40.0
TRIES = 3


@dataclass(frozen=True)
class Attempts:
    """The task attempts of one job, as Spark's status store recorded them."""

    speculative: int  # speculative attempts launched
    speculative_won: int  # speculative attempts that succeeded (the partition's result)
    killed: int  # attempts killed (e.g. "another attempt succeeded")
    running: int  # attempts not finished yet


def job_attempts(spark: SparkSession, group: str) -> Attempts:
    """Count the attempts of the jobs in ``group`` (stage task lists of the status store)."""
    sc = spark.sparkContext
    jvm: Any = sc._jvm
    sc._jsc.sc().listenerBus().waitUntilEmpty(10_000)  # every task event is in the store
    store = sc._jsc.sc().statusStore()
    tracker = sc.statusTracker()
    speculative = won = killed = running = 0
    for job_id in tracker.getJobIdsForGroup(group):
        job = tracker.getJobInfo(job_id)
        for stage_id in job.stageIds if job else ():
            stage = tracker.getStageInfo(stage_id)
            if stage is None:
                continue
            tasks = jvm.scala.jdk.javaapi.CollectionConverters.asJava(
                store.taskList(stage_id, stage.currentAttemptId, 100_000))
            for task in tasks:
                status = str(task.status())
                speculative += int(task.speculative())
                won += int(task.speculative() and status == "SUCCESS")
                killed += int(status == "KILLED")
                running += int(status == "RUNNING")
    return Attempts(speculative, won, killed, running)


def settled_attempts(spark: SparkSession, group: str) -> Attempts:
    """:func:`job_attempts` once no attempt runs (the late duplicate has ended) or on timeout."""
    deadline = time.monotonic() + SETTLE_TIMEOUT_S
    while True:
        attempts = job_attempts(spark, group)
        if attempts.running == 0 or time.monotonic() > deadline:
            return attempts
        time.sleep(0.5)


@contextmanager
def job_group(spark: SparkSession, group: str) -> Iterator[None]:
    sc = spark.sparkContext
    sc.setJobGroup(group, "write matrix: speculation")
    try:
        yield
    finally:
        sc.setLocalProperty("spark.jobGroup.id", None)  # type: ignore[arg-type]


@contextmanager
def speculation_session(run_dir: Path, info: StackInfo) -> Iterator[SparkSession]:
    """A two-host standalone cluster (one gateway per worker) and a speculating session on it."""
    from devstack.spark_cluster import SparkCluster
    from devstack.spark_session import spark_session

    with SparkCluster(run_dir, info, workers=2, cores_per_worker=1, distinct_hosts=True) as cl:
        env = {"LAKEGATE_URL": f"grpc+unix:{info.gateway.grpc_uds}",
               "LAKEGATE_WAREHOUSE": info.warehouse.name, "LAKEGATE_TEST_FAULTS": "1",
               "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable}
        with patch.dict(os.environ, env):
            spark = spark_session(cl.master_url, app_name="lakegate-harden-speculation",
                                  conf={**cl.spark_conf(), **SPECULATION_CONF})
        try:
            yield spark
        finally:
            spark.stop()
