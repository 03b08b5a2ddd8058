"""The ``lakekeeper`` data source reads and writes an Iceberg table through the gateway.

The driver plans and commits with pyiceberg against the gateway's `/catalog`; tasks read and
write data files with their node's Iceberg-table credential (gRPC over the gateway's socket).
The catalog emulator's counters show one commit per Spark write.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest
from pyiceberg.catalog.rest import RestCatalog

from devstack.stack_info import StackInfo

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from tests.e2e.conftest import Upstream

pytestmark = [pytest.mark.e2e, pytest.mark.slow]


def _frame(spark: SparkSession, start: int, count: int, partitions: int) -> DataFrame:
    from pyspark.sql import functions as F

    return spark.range(start, start + count, numPartitions=partitions).withColumn(
        "label", F.concat(F.lit("row-"), F.col("id").cast("string"))
    )


def test_spark_writes_appends_overwrites_and_reads_an_iceberg_table(
    spark: SparkSession, stack_info: StackInfo, namespace: str, table_name: str,
    upstream: Upstream,
) -> None:
    qualified = f"{namespace}.{table_name}"
    http_url = stack_info.gateway_url

    def writer(df: DataFrame) -> Any:
        return (df.write.format("lakekeeper").option("table", qualified)
                .option("format", "iceberg").option("catalog_url", http_url))

    def ids() -> list[int]:
        df = (spark.read.format("lakekeeper").option("table", qualified)
              .option("format", "iceberg").option("catalog_url", http_url).load())
        return sorted(r.id for r in df.select("id").collect())

    before = upstream.catalog_stats()
    writer(_frame(spark, 0, 40, 3)).option("create", "true").mode("append").save()
    after_first = upstream.catalog_stats()
    assert after_first["create_table"] - before["create_table"] == 1
    assert after_first["commit_table"] - before["commit_table"] == 1  # one driver commit
    writer(_frame(spark, 40, 20, 2)).mode("append").save()
    assert upstream.catalog_stats()["commit_table"] - after_first["commit_table"] == 1
    assert ids() == list(range(60))

    df = (spark.read.format("lakekeeper").option("table", qualified)
          .option("format", "iceberg").option("catalog_url", http_url).load())
    assert df.rdd.getNumPartitions() == 5  # one per data file the two writes added
    assert [f.name for f in df.schema.fields] == ["id", "label"]
    assert df.filter("id = 41").select("label").collect()[0].label == "row-41"

    writer(_frame(spark, 100, 5, 1)).mode("overwrite").save()
    assert ids() == list(range(100, 105))

    # pyiceberg, directly against the gateway, sees what Spark committed
    rest = RestCatalog("check", uri=http_url + "/catalog",
                       warehouse=stack_info.warehouse.name,
                       **{"header.X-Lakegate-Request": "1"})
    table = rest.load_table((namespace, table_name))
    assert table.scan().to_arrow().num_rows == 5
    assert len(table.snapshots()) >= 3
    rest.drop_table((namespace, table_name))
