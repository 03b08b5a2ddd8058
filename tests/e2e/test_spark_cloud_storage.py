"""The ``lakekeeper`` data source on ADLS (Azurite) and GCS (fake-gcs-server behind the stack's
token-checking layer): Spark writes and reads tables with credentials from the gateway, rows
exact. Tasks reach the local store through the ``storage_endpoint`` option (Lakekeeper never
vends an ADLS or GCS endpoint).

On GCS Parquet and Lance run (Lance's object_store speaks GCS's XML API, which the stack's
token-checking layer serves on fake-gcs-server's JSON API); Delta does not: deltalake takes no
raw access token on GCS, and the data source refuses it before anything is written."""

from __future__ import annotations

import time
import uuid
from typing import TYPE_CHECKING, Any

import pytest

from devstack.launcher import Stack
from lakegate_client import Client

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from devstack.stack_info import StackInfo

pytestmark = [pytest.mark.e2e, pytest.mark.slow]


def _frame(spark: SparkSession, start: int, count: int, partitions: int) -> DataFrame:
    from pyspark.sql import functions as F

    return (
        spark.range(start, start + count, numPartitions=partitions)
        .withColumn("label", F.concat(F.lit("row-"), F.col("id").cast("string")))
        .withColumn("score", F.col("id") * 0.5)
    )


@pytest.mark.parametrize(
    ("storage", "fmt"),
    [
        ("adls", "parquet"),
        ("adls", "delta"),
        ("adls", "lance"),
        ("gcs", "parquet"),
        ("gcs", "lance"),
    ],
)
def test_spark_round_trip_on_cloud_storage(
    spark: SparkSession, cloud_stack: Stack, storage: str, fmt: str
) -> None:
    info = cloud_stack.info
    assert info.azure is not None
    assert info.gcs is not None
    endpoint = info.azure.blob_endpoint if storage == "adls" else info.gcs.endpoint
    warehouse = info.warehouse_for(storage).name
    qualified = f"{info.namespace}.s_{fmt}_{uuid.uuid4().hex[:8]}"
    options = {
        "table": qualified,
        "url": f"grpc+unix:{info.gateway.grpc_uds}",
        "warehouse": warehouse,
        "storage_endpoint": endpoint,
    }

    def write(frame: DataFrame, mode: str, **extra: str) -> None:
        frame.write.format("lakekeeper").options(**options, **extra).mode(mode).save()

    def ids() -> list[int]:
        frame = spark.read.format("lakekeeper").options(**options).load()
        return sorted(r.id for r in frame.select("id").collect())

    write(_frame(spark, 0, 40, 3), "overwrite", format=fmt, create="true")
    write(_frame(spark, 40, 20, 2), "append")
    assert ids() == list(range(60))
    frame = spark.read.format("lakekeeper").options(**options).load()
    assert {f.name for f in frame.schema.fields} == {"id", "label", "score"}
    assert frame.filter("id = 7").select("label").collect()[0].label == "row-7"
    write(_frame(spark, 100, 5, 1), "overwrite")
    assert ids() == list(range(100, 105))
    with Client(f"unix:{info.gateway.uds}", warehouse=warehouse) as client:
        creds = client.credentials(info.namespace, qualified.split(".")[1])
        assert creds.storage == storage
    if fmt != "parquet":  # each job wrote its intent on this store and removed it once committed
        from lakegate_client.engine.job_intent import job_intents

        assert job_intents(*_store(info, qualified, storage)) == []


def _endpoint(info: StackInfo, storage: str) -> str:
    """The local store's endpoint (a client setting: Lakekeeper never vends one)."""
    if storage == "adls":
        assert info.azure is not None
        return info.azure.blob_endpoint
    assert info.gcs is not None
    return info.gcs.endpoint


def _options(info: StackInfo, qualified: str, storage: str) -> dict[str, str]:
    return {"table": qualified, "url": f"grpc+unix:{info.gateway.grpc_uds}",
            "warehouse": info.warehouse_for(storage).name,
            "storage_endpoint": _endpoint(info, storage)}


def _store(info: StackInfo, qualified: str, storage: str) -> tuple[Any, Any]:
    """The table's ObjectStore (a vended write credential) and location."""
    from lakegate_client.engine.stores.adls import AzureBlobStore
    from lakegate_client.engine.stores.base import S3Location
    from lakegate_client.engine.stores.gcs import GcsStore

    namespace, name = qualified.split(".")
    with Client(f"unix:{info.gateway.uds}", warehouse=info.warehouse_for(storage).name) as client:
        creds = client.credentials(namespace, name, access="write").with_storage_endpoint(
            _endpoint(info, storage))
    kind = AzureBlobStore if storage == "adls" else GcsStore
    return kind.for_credentials(creds), S3Location.parse(creds.location)


def _data_files(info: StackInfo, qualified: str, storage: str) -> list[str]:
    """The table's data files as a Hive-convention reader lists them (staged files skipped)."""
    from lakegate_client.tables.directory import is_visible

    store, where = _store(info, qualified, storage)
    return sorted(rel for rel in (where.relative(k) for k in store.list(f"{where.prefix}/"))
                  if is_visible(rel) and rel.endswith(".parquet"))


def test_an_aborted_adls_parquet_job_shows_no_row_even_from_a_task_finishing_after_abort(
    spark: SparkSession, cloud_stack: Stack
) -> None:
    """On ADLS a failed job's tasks stage blocks that nothing publishes, also those of tasks
    finishing after ``abort`` (issue 34)."""
    info = cloud_stack.info
    qualified = f"{info.namespace}.s_abort_{uuid.uuid4().hex[:8]}"
    options = _options(info, qualified, "adls")
    _frame(spark, 1000, 12, 1).write.format("lakekeeper").options(
        **options, format="parquet", create="true").mode("overwrite").save()
    seed = _data_files(info, qualified, "adls")
    with pytest.raises(Exception, match="injected fault after_land@0"):
        _frame(spark, 0, 40, 4).write.format("lakekeeper").options(
            **options, test_fault="after_land@0,slow@1=4,slow@2=4,slow@3=4").mode(
            "append").save()
    time.sleep(8)  # the slowed tasks have finished their files by now
    ids = sorted(r.id for r in spark.read.format("lakekeeper").options(**options).load()
                 .select("id").collect())
    assert ids == list(range(1000, 1012))
    assert _data_files(info, qualified, "adls") == seed


def test_spark_plain_write_on_gcs_runs_the_commit_protocol(
    spark: SparkSession, cloud_stack: Stack
) -> None:
    """On GCS a plain write stages hidden parts and the driver publishes them: afterwards the
    table has its commit marker, no intent and no staged part left, and rows are exact."""
    from lakegate_client.engine.formats.plain import INTENT_PREFIX, MARKER
    from lakegate_client.engine.stores.base import S3Location
    from lakegate_client.engine.stores.gcs import STAGING_DIR, GcsStore

    info = cloud_stack.info
    assert info.gcs is not None
    warehouse = info.warehouse_for("gcs").name
    name = f"s_plain_{uuid.uuid4().hex[:8]}"
    options = {"table": f"{info.namespace}.{name}", "url": f"grpc+unix:{info.gateway.grpc_uds}",
               "warehouse": warehouse, "storage_endpoint": info.gcs.endpoint}  # fmt: skip
    _frame(spark, 0, 30, 3).write.format("lakekeeper").options(
        **options, format="parquet", create="true").mode("overwrite").save()  # fmt: skip
    _frame(spark, 30, 10, 2).write.format("lakekeeper").options(**options).mode("append").save()
    frame = spark.read.format("lakekeeper").options(**options).load()
    assert sorted(r.id for r in frame.select("id").collect()) == list(range(40))
    with Client(f"unix:{info.gateway.uds}", warehouse=warehouse) as client:
        creds = client.credentials(info.namespace, name).with_storage_endpoint(info.gcs.endpoint)
    where = S3Location.parse(creds.location)
    keys = [k[len(where.prefix) + 1 :] for k in GcsStore.for_credentials(creds).list(
        where.prefix + "/")]  # fmt: skip
    assert MARKER in keys
    assert not [k for k in keys if k.startswith(INTENT_PREFIX) or STAGING_DIR in k]
    assert len([k for k in keys if k.endswith(".parquet")]) == 5  # 3 tasks, then 2


@pytest.mark.parametrize("storage", ["adls", "gcs"])
def test_a_listing_during_a_parquet_job_sees_none_of_its_files(
    spark: SparkSession, cloud_stack: Stack, storage: str
) -> None:
    """Regression (issue 34): on ADLS and GCS tasks wrote visible ``part-*`` files, so a reader
    listing the table during a job saw the rows of the tasks that had finished. Now a finished
    task's file is uncommitted blocks (ADLS) or hidden staged parts (GCS) until the driver's
    commit publishes it."""
    from devstack.spark_writes import concurrently

    info = cloud_stack.info
    qualified = f"{info.namespace}.s_mid_{uuid.uuid4().hex[:8]}"
    options = _options(info, qualified, storage)
    _frame(spark, 1000, 12, 1).write.format("lakekeeper").options(
        **options, format="parquet", create="true").mode("overwrite").save()
    seed = _data_files(info, qualified, storage)
    store, where = _store(info, qualified, storage)
    seen: list[list[str]] = []

    def job() -> None:  # task 1 sleeps 20 s once its rows are read; task 0 finishes at once
        _frame(spark, 0, 40, 2).write.format("lakekeeper").options(
            **options, test_fault="slow@1=20").mode("append").save()

    def observe() -> None:  # as soon as task 0 is done (staged, or, before, visible)
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            files = _data_files(info, qualified, storage)
            if files != seed or list(store.pending_staged(f"{where.prefix}/")):
                seen.append(_data_files(info, qualified, storage))
                return
            time.sleep(0.5)

    errors = concurrently(spark, job, observe)
    assert errors == [None, None]
    assert seen == [seed]  # task 0's file existed, invisible
    ids = sorted(r.id for r in spark.read.format("lakekeeper").options(**options).load()
                 .select("id").collect())
    assert ids == sorted([*range(1000, 1012), *range(40)])


@pytest.mark.parametrize("storage", ["adls", "gcs"])
def test_two_concurrent_parquet_overwrites_never_tear_the_table(
    spark: SparkSession, cloud_stack: Stack, storage: str
) -> None:
    """Regression (issue 34): plain tables on ADLS and GCS had no conflict check, so two
    overwrites both "won" and each deleted what the other wrote. Now one commits and the other
    fails with the conflict error, or they land in a serial order."""
    from devstack.spark_writes import concurrently, is_conflict

    info = cloud_stack.info
    qualified = f"{info.namespace}.s_race_{uuid.uuid4().hex[:8]}"
    options = _options(info, qualified, storage)
    _frame(spark, 0, 10, 1).write.format("lakekeeper").options(
        **options, format="parquet", create="true").mode("overwrite").save()
    at = f"commit_at@0={time.time() + 30}"  # both drivers commit at the same moment

    def overwrite(start: int) -> None:
        _frame(spark, start, 40, 4).write.format("lakekeeper").options(
            **options, test_fault=at).mode("overwrite").save()

    errors = concurrently(spark, lambda: overwrite(100), lambda: overwrite(200))
    for error in errors:
        assert error is None or is_conflict(error), str(error)[-3000:]
    assert any(e is None for e in errors)
    ids = sorted(r.id for r in spark.read.format("lakekeeper").options(**options).load()
                 .select("id").collect())
    assert ids in (list(range(100, 140)), list(range(200, 240))), f"torn: {len(ids)} rows"
    assert len(_data_files(info, qualified, storage)) == 4
