"""The ``lakekeeper`` data source on ADLS (Azurite) and GCS (fake-gcs-server behind the stack's
token-checking layer): Spark writes and reads tables with credentials from the gateway, rows
exact. Tasks reach the local store through the ``storage_endpoint`` option (Lakekeeper never
vends an ADLS or GCS endpoint).

On GCS Parquet and Lance run (Lance's object_store speaks GCS's XML API, which the stack's
token-checking layer serves on fake-gcs-server's JSON API); Delta does not: deltalake takes no
raw access token on GCS, and the data source refuses it before anything is written."""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING

import pytest

from devstack.launcher import Stack
from lakegate_client import Client

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

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


def test_spark_plain_write_on_gcs_runs_the_commit_protocol(
    spark: SparkSession, cloud_stack: Stack
) -> None:
    """On GCS a plain write stages hidden parts and the driver publishes them: afterwards the
    table has its commit marker, no intent and no staged part left, and rows are exact."""
    from lakegate_client.tables.gcs_store import STAGING_DIR, GcsStore
    from lakegate_client.tables.plain_commit import INTENT_PREFIX, MARKER
    from lakegate_client.tables.staged import S3Location

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
