"""Spark write jobs against the local stack, one at a time or racing on threads of one session.

Shared by the e2e write-protocol tests and the hardening write matrix, so both drive the
``lakekeeper`` data source the same way.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

# What a job that loses a race may fail with: Lakegate's plain-table conflict, Lance's,
# Iceberg's and delta-rs's own commit conflicts, and pyiceberg's serializable-isolation checks of
# an overwrite against files a concurrent commit added or deleted (all raised before anything
# became visible).
CONFLICT = re.compile(
    r"since this job planned|was committing when this job planned|CommitConflictError"
    r"|Incompatible transaction|CommitFailedException|CommitFailedError"
    r"|ValidationException: (Added|Deleted) data files were found matching the filter"
    r"|ValidationException: Data files were concurrently deleted"
)


def frame(spark: SparkSession, start: int, count: int, partitions: int = 2) -> DataFrame:
    """Rows ``start .. start+count-1`` in column ``id``."""
    return spark.range(start, start + count, numPartitions=partitions)


def save(df: DataFrame, qualified: str, fmt: str, mode: str, *, fault: str = "",
         catalog_url: str = "", options: Mapping[str, str] | None = None) -> None:
    """Write ``df`` with ``create=true`` (Iceberg needs the gateway's HTTP ``catalog_url``;
    ``options``: more data source options, e.g. another storage's warehouse and endpoint)."""
    w = df.write.format("lakekeeper").option("table", qualified).option("format", fmt)
    w = w.options(**(options or {}))
    if catalog_url:
        w = w.option("catalog_url", catalog_url)
    if fault:
        w = w.option("test_fault", fault)
    w.option("create", "true").mode(mode).save()


def spark_ids(spark: SparkSession, qualified: str, fmt: str = "", catalog_url: str = "",
              options: Mapping[str, str] | None = None) -> list[int]:
    """The table's ``id`` column as Spark's reader sees it, sorted."""
    r = spark.read.format("lakekeeper").option("table", qualified).options(**(options or {}))
    if fmt == "iceberg":
        r = r.option("format", "iceberg").option("catalog_url", catalog_url)
    return sorted(row.id for row in r.load().select("id").collect())


def is_conflict(error: BaseException) -> bool:
    return CONFLICT.search(str(error)) is not None


def concurrently(spark: SparkSession, *jobs: Callable[[], None]) -> list[BaseException | None]:
    """Run the jobs on threads of one SparkSession; each one's error (None: it succeeded)."""
    from pyspark.sql import SparkSession as PySparkSession

    def run(job: Callable[[], None]) -> BaseException | None:
        # A new thread has no active JVM session; Python data sources resolve through it.
        jvm_session = PySparkSession._get_j_spark_session_class(spark._jvm)  # type: ignore[attr-defined]
        jvm_session.setActiveSession(spark._jsparkSession)
        try:
            job()
        except Exception as exc:  # noqa: BLE001 - the caller judges it
            return exc
        return None

    with ThreadPoolExecutor(len(jobs)) as pool:
        return list(pool.map(run, jobs))
