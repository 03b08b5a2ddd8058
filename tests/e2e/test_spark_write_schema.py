"""Write schemas are checked at planning, through a gateway on the devstack (issue 50 items 3,
5 and 9): a DataFrame that does not fit its table is refused before any task writes, naming
the columns and the table, and the table reads as before; ``mergeSchema`` / ``overwriteSchema``
evolve it where the format allows; an empty overwrite of a plain table leaves 0 readable rows
with the schema; a Delta write on GCS is refused without keeping the name it would have created.
Used to be: such appends committed (Delta versions no reader could read, plain tables with two
schemas, Iceberg writes dropping columns), the empty overwrite left no schema, and the refused
Delta create kept the name."""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, Any

import pytest

from lakegate_client import NotFoundError
from lakegate_client.tables import read_table

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from devstack.launcher import Stack
    from devstack.stack_info import StackInfo
    from lakegate_client import Client

pytestmark = [pytest.mark.e2e, pytest.mark.slow]


def _frame(spark: SparkSession, start: int, count: int) -> DataFrame:
    from pyspark.sql import functions as F

    return (spark.range(start, start + count, numPartitions=2)
            .withColumn("label", F.when(F.col("id") >= 0,  # nullable, as most columns are
                                        F.concat(F.lit("row-"), F.col("id").cast("string"))))
            .withColumn("score", F.col("id") * 0.5))


def _save(frame: DataFrame, qualified: str, mode: str, **options: str) -> None:
    frame.write.format("lakekeeper").options(table=qualified, **options).mode(mode).save()


def _read(spark: SparkSession, qualified: str, **options: str) -> DataFrame:
    return spark.read.format("lakekeeper").options(table=qualified, **options).load()


def _ids(spark: SparkSession, qualified: str, **options: str) -> list[int]:
    return sorted(r.id for r in _read(spark, qualified, **options).select("id").collect())


@pytest.mark.parametrize("fmt", ["parquet", "delta", "lance"])
def test_a_dataframe_that_does_not_fit_is_refused_and_the_table_reads_as_before(
    spark: SparkSession, client: Client, namespace: str, table_name: str, fmt: str,
) -> None:
    from pyspark.sql import functions as F

    qualified = f"{namespace}.{table_name}"
    _save(_frame(spark, 0, 10), qualified, "overwrite", format=fmt, create="true")
    extra = _frame(spark, 10, 5).withColumn("extra", F.lit(1))
    with pytest.raises(Exception, match=rf"SchemaMismatchError.*{qualified}.*'extra' is not in"):
        _save(extra, qualified, "append")
    retyped = _frame(spark, 10, 5).withColumn("score", F.col("label"))
    with pytest.raises(Exception, match=r"'score' is string in the DataFrame, not the table's "
                                        r"double"):
        _save(retyped, qualified, "append")
    with pytest.raises(Exception, match="overwriteSchema=true replaces the schema"):
        _save(extra, qualified, "overwrite")
    assert _ids(spark, qualified) == list(range(10))
    assert read_table(client, namespace, table_name).num_rows == 10

    # a missing nullable column is written as nulls; a narrower type is cast up
    _save(_frame(spark, 10, 5).drop("label").withColumn("id", F.col("id").cast("int")),
          qualified, "append")
    rows = {r.id: r.label for r in _read(spark, qualified).collect()}
    assert sorted(rows) == list(range(15))
    assert [rows[i] for i in range(9, 12)] == ["row-9", None, None]
    assert read_table(client, namespace, table_name).schema.names == ["id", "label", "score"]

    # overwriteSchema replaces the schema
    _save(extra.drop("score"), qualified, "overwrite", overwriteSchema="true")
    assert _read(spark, qualified).columns == ["id", "label", "extra"]
    assert _ids(spark, qualified) == list(range(10, 15))


def test_merge_schema_adds_a_column_to_a_delta_table_old_rows_read_null(
    spark: SparkSession, client: Client, namespace: str, table_name: str,
) -> None:
    from pyspark.sql import functions as F

    qualified = f"{namespace}.{table_name}"
    _save(_frame(spark, 0, 10), qualified, "overwrite", format="delta", create="true")
    _save(_frame(spark, 10, 5).withColumn("extra", F.col("id") * 2), qualified, "append",
          mergeSchema="true")
    rows = {r.id: r.extra for r in _read(spark, qualified).collect()}
    assert sorted(rows) == list(range(15))
    assert [rows[i] for i in (9, 10, 14)] == [None, 20, 28]
    arrow = read_table(client, namespace, table_name)
    assert arrow.schema.names == ["id", "label", "score", "extra"]
    assert arrow.num_rows == 15
    with pytest.raises(Exception, match="parquet tables have no mergeSchema"):
        _save(_frame(spark, 0, 1), f"{namespace}.{table_name}_p", "overwrite", format="parquet",
              create="true", mergeSchema="true")
    with pytest.raises(NotFoundError):
        read_table(client, namespace, f"{table_name}_p")  # refused before the create


def test_an_empty_overwrite_of_a_plain_table_leaves_zero_rows_with_its_schema(
    spark: SparkSession, client: Client, namespace: str, table_name: str,
) -> None:
    qualified = f"{namespace}.{table_name}"
    frame = _frame(spark, 0, 10)
    _save(frame, qualified, "overwrite", format="parquet", create="true")
    _save(frame.limit(0), qualified, "overwrite")
    read = _read(spark, qualified)
    assert read.columns == ["id", "label", "score"]
    assert read.count() == 0
    arrow = read_table(client, namespace, table_name)
    assert (arrow.num_rows, arrow.schema.names) == (0, ["id", "label", "score"])
    _save(_frame(spark, 20, 3), qualified, "append")  # and it takes appends again
    assert _ids(spark, qualified) == [20, 21, 22]


def test_iceberg_refuses_extra_columns_and_merge_schema_adds_them(
    spark: SparkSession, stack_info: StackInfo, namespace: str, table_name: str,
) -> None:
    from pyspark.sql import functions as F

    qualified = f"{namespace}.{table_name}"
    iceberg: dict[str, Any] = {"format": "iceberg", "catalog_url": stack_info.gateway_url}
    _save(_frame(spark, 0, 10), qualified, "append", create="true", **iceberg)
    extra = _frame(spark, 10, 5).withColumn("extra", F.col("id") * 2)
    with pytest.raises(Exception, match=r"'extra' is not in the table"):
        _save(extra, qualified, "append", **iceberg)
    assert _ids(spark, qualified, **iceberg) == list(range(10))
    _save(extra, qualified, "append", mergeSchema="true", **iceberg)
    rows = {r.id: r.extra for r in _read(spark, qualified, **iceberg).collect()}
    assert [rows[i] for i in (9, 10, 14)] == [None, 20, 28]
    with pytest.raises(Exception, match="iceberg tables have no overwriteSchema"):
        _save(extra, qualified, "overwrite", overwriteSchema="true", **iceberg)


def test_a_delta_write_on_gcs_refused_at_planning_leaves_the_name_free(
    spark: SparkSession, cloud_stack: Stack,
) -> None:
    from lakegate_client import Client

    info = cloud_stack.info
    assert info.gcs is not None
    warehouse = info.warehouse_for("gcs").name
    name = f"g_{uuid.uuid4().hex[:8]}"
    options = {"url": f"grpc+unix:{info.gateway.grpc_uds}", "warehouse": warehouse,
               "storage_endpoint": info.gcs.endpoint}
    qualified = f"{info.namespace}.{name}"
    with pytest.raises(Exception, match="UnsupportedStorageError"):
        _save(_frame(spark, 0, 5), qualified, "overwrite", format="delta", create="true",
              **options)
    _save(_frame(spark, 0, 5), qualified, "overwrite", format="parquet", create="true",
          **options)
    assert _ids(spark, qualified, **options) == list(range(5))
    with Client(f"unix:{info.gateway.uds}", warehouse=warehouse) as client:
        assert client.load(info.namespace, name).format == "parquet"
