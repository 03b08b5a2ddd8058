"""The Spark write protocol under failure injection: a bounded sample of the hardening matrix.

Each case ends with the rows of the successful jobs exactly once (Spark's reader and the format's
own reader, as the storage owner), no rows of failed jobs, and no orphan object under the
location; or with the conflict error the case expects. Faults come from the test-only
``test_fault`` option (``lakegate_client/spark/faults.py``).
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

import pytest

from devstack.spark_writes import concurrently, frame, is_conflict, save, spark_ids
from devstack.table_audit import TableAuditor
from lakegate_client import tables

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from devstack.stack_info import StackInfo
    from lakegate_client import Client

pytestmark = [pytest.mark.e2e, pytest.mark.slow]


@pytest.fixture(scope="module")
def auditor(stack_info: StackInfo) -> TableAuditor:
    return TableAuditor(stack_info)


def _location(client: Client, namespace: str, table: str) -> str:
    return tables.describe_table(client, namespace, table).location


def test_an_aborted_parquet_job_shows_no_row_even_from_a_task_finishing_after_abort(
    spark: SparkSession, client: Client, auditor: TableAuditor, namespace: str, table_name: str
) -> None:
    """Regression: tasks used to write visible files, so a task still running when ``abort``
    listed the job's files published its rows a second later (12 rows became 1,012)."""
    qualified = f"{namespace}.{table_name}"
    save(frame(spark, 1000, 12), qualified, "parquet", "overwrite")
    with pytest.raises(Exception, match="injected fault after_land@0"):
        save(frame(spark, 0, 40, 4), qualified, "parquet", "append",
              fault="after_land@0,slow@1=4,slow@2=4,slow@3=4")
    time.sleep(8)  # the slowed tasks have finished their files by now
    expected = list(range(1000, 1012))
    assert spark_ids(spark, qualified) == expected
    audit = auditor.audit("parquet", _location(client, namespace, table_name))
    assert audit.native_ids == expected
    assert audit.orphans == []


def test_an_aborted_lance_job_leaves_no_fragment_file_even_from_a_task_finishing_after_abort(
    spark: SparkSession, client: Client, auditor: TableAuditor, namespace: str, table_name: str
) -> None:
    """Regression: a task still running at ``abort`` landed its fragment file afterwards, an
    orphan under ``data/``. Now it records the file in the attempt ledger, and the next job's
    cleanup on the dataset deletes it: never an orphan, and gone after the next write."""
    qualified = f"{namespace}.{table_name}"
    save(frame(spark, 1000, 12), qualified, "lance", "overwrite")
    with pytest.raises(Exception, match="injected fault after_land@0"):
        save(frame(spark, 0, 40, 4), qualified, "lance", "append",
              fault="after_land@0,slow@1=4,slow@2=4,slow@3=4")
    time.sleep(8)  # the slowed tasks have finished their fragments by now
    expected = list(range(1000, 1012))
    assert spark_ids(spark, qualified) == expected
    location = _location(client, namespace, table_name)
    audit = auditor.audit("lance", location)
    assert audit.native_ids == expected
    assert audit.orphans == []
    assert all(r.startswith(("data/", "_lakegate_attempts/")) for r in audit.awaiting_sweep)
    save(frame(spark, 2000, 4, 2), qualified, "lance", "append")  # the next job's commit
    expected += list(range(2000, 2004))
    audit = auditor.audit("lance", location)
    assert (audit.native_ids, audit.orphans, audit.awaiting_sweep) == (expected, [], [])


def test_a_parquet_task_that_fails_once_is_retried_and_its_rows_appear_once(
    spark: SparkSession, client: Client, auditor: TableAuditor, namespace: str, table_name: str
) -> None:
    qualified = f"{namespace}.{table_name}"
    save(frame(spark, 0, 30, 3), qualified, "parquet", "overwrite",
          fault="after_land@1#once,before_land@2#once")
    assert spark_ids(spark, qualified) == list(range(30))
    audit = auditor.audit("parquet", _location(client, namespace, table_name))
    assert audit.native_ids == list(range(30))
    assert audit.orphans == []
    assert audit.pending_uploads == 0  # failed attempts abort their own uploads


def test_two_concurrent_parquet_overwrites_never_tear_the_table(
    spark: SparkSession, client: Client, auditor: TableAuditor, namespace: str, table_name: str
) -> None:
    """Regression: both overwrites used to succeed and leave a mix of their files."""
    qualified = f"{namespace}.{table_name}"
    save(frame(spark, 0, 10), qualified, "parquet", "overwrite")
    a, b = list(range(100, 140)), list(range(200, 240))
    at = f"commit_at@0={time.time() + 30}"  # both drivers commit at the same moment
    errors = concurrently(
        spark,
        lambda: save(frame(spark, 100, 40, 4), qualified, "parquet", "overwrite", fault=at),
        lambda: save(frame(spark, 200, 40, 4), qualified, "parquet", "overwrite", fault=at),
    )
    for error in errors:
        assert error is None or is_conflict(error), str(error)[-3000:]
    assert any(e is None for e in errors)
    ids = spark_ids(spark, qualified)
    assert ids in (a, b), f"torn table: {len(ids)} rows"
    audit = auditor.audit("parquet", _location(client, namespace, table_name))
    assert audit.native_ids == ids
    assert audit.orphans == []


def test_two_lance_appends_to_a_missing_table_keep_every_row(
    spark: SparkSession, client: Client, auditor: TableAuditor, namespace: str, table_name: str
) -> None:
    """Regression: an append that planned against a missing table committed an Overwrite."""
    qualified = f"{namespace}.{table_name}"
    at = f"commit_at@0={time.time() + 30}"
    errors = concurrently(
        spark,
        lambda: save(frame(spark, 0, 40), qualified, "lance", "append", fault=at),
        lambda: save(frame(spark, 100, 40), qualified, "lance", "append", fault=at),
    )
    assert errors == [None, None], [str(e)[-3000:] for e in errors if e]
    expected = list(range(40)) + list(range(100, 140))
    assert spark_ids(spark, qualified) == expected
    assert auditor.audit("lance", _location(client, namespace, table_name)).native_ids == expected


def test_a_failed_delta_job_leaves_no_file_behind(
    spark: SparkSession, client: Client, auditor: TableAuditor, namespace: str, table_name: str
) -> None:
    qualified = f"{namespace}.{table_name}"
    save(frame(spark, 0, 10), qualified, "delta", "overwrite")
    with pytest.raises(Exception, match="injected fault"):
        save(frame(spark, 50, 20, 2), qualified, "delta", "append", fault="after_land@1")
    with pytest.raises(Exception, match="injected fault before_commit"):
        save(frame(spark, 50, 20, 2), qualified, "delta", "append", fault="before_commit@0")
    assert spark_ids(spark, qualified) == list(range(10))
    audit = auditor.audit("delta", _location(client, namespace, table_name))
    assert audit.native_ids == list(range(10))
    assert audit.orphans == []


def test_a_write_the_writer_refuses_creates_no_table(
    spark: SparkSession, client: Client, namespace: str, table_name: str
) -> None:
    from lakegate_client import NotFoundError

    with pytest.raises(Exception, match="read-only in Spark"):
        save(frame(spark, 0, 4), f"{namespace}.{table_name}", "csv", "append")
    with pytest.raises(NotFoundError):
        tables.describe_table(client, namespace, table_name)


def test_two_jobs_creating_one_iceberg_table_both_land_and_a_failed_one_leaves_nothing(
    spark: SparkSession, stack_info: StackInfo, auditor: TableAuditor, namespace: str,
    table_name: str,
) -> None:
    """Regression: the job that lost the create race failed with TableAlreadyExistsError."""
    qualified, url = f"{namespace}.{table_name}", stack_info.gateway_url
    errors = concurrently(
        spark,
        lambda: save(frame(spark, 0, 20), qualified, "iceberg", "append", catalog_url=url),
        lambda: save(frame(spark, 100, 20), qualified, "iceberg", "append", catalog_url=url),
    )
    assert errors == [None, None], [str(e)[-3000:] for e in errors if e]
    with pytest.raises(Exception, match="injected fault after_land@1"):
        save(frame(spark, 500, 20), qualified, "iceberg", "append", fault="after_land@1",
              catalog_url=url)
    expected = list(range(20)) + list(range(100, 120))
    table = auditor.iceberg_table(namespace, table_name)
    audit = auditor.audit("iceberg", str(table.location()), table)
    assert audit.native_ids == expected
    assert audit.orphans == []
