"""The ``lakekeeper`` data source writes and reads each format through the gateway."""

from __future__ import annotations

import pickle
from typing import TYPE_CHECKING

import pyarrow as pa
import pytest

from devstack.stack_info import StackInfo
from lakegate_client.tables import read_table, write_table
from tests.integration.client.plain_storage import owner_filesystem, plain_listing_ids

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from lakegate_client import Client

pytestmark = [pytest.mark.e2e, pytest.mark.slow]


def _frame(spark: SparkSession, start: int, count: int, partitions: int) -> DataFrame:
    from pyspark.sql import functions as F

    first_day = F.to_date(F.lit("2026-10-01"))

    return (
        spark.range(start, start + count, numPartitions=partitions)
        .withColumn("label", F.concat(F.lit("row-"), F.col("id").cast("string")))
        .withColumn("score", F.col("id") * 0.5)
        .withColumn("day", F.date_add(first_day, (F.col("id") % 30).cast("int")))
    )


def _ids(spark: SparkSession, qualified: str) -> list[int]:
    rows = spark.read.format("lakekeeper").option("table", qualified).load().select("id").collect()
    return sorted(r.id for r in rows)


@pytest.mark.parametrize("fmt", ["parquet", "delta", "lance"])
def test_write_append_overwrite_then_read_back_each_format(
    spark: SparkSession,
    client: Client,
    stack_info: StackInfo,
    namespace: str,
    table_name: str,
    fmt: str,
) -> None:
    qualified = f"{namespace}.{table_name}"
    writer = _frame(spark, 0, 40, 3).write.format("lakekeeper").option("table", qualified)
    writer.option("format", fmt).option("create", "true").mode("overwrite").save()
    _frame(spark, 40, 20, 2).write.format("lakekeeper").option("table", qualified).mode(
        "append"
    ).save()
    assert _ids(spark, qualified) == list(range(60))

    df = spark.read.format("lakekeeper").option("table", qualified).load()
    assert df.rdd.getNumPartitions() >= 2  # one partition per file / fragment, not one in all
    assert {f.name for f in df.schema.fields} == {"id", "label", "score", "day"}

    _frame(spark, 100, 5, 1).write.format("lakekeeper").option("table", qualified).mode(
        "overwrite"
    ).save()
    assert _ids(spark, qualified) == list(range(100, 105))
    # The same table through the Arrow helper (no Spark): same rows.
    assert sorted(read_table(client, namespace, table_name).column("id").to_pylist()) == list(
        range(100, 105)
    )
    if fmt == "parquet":  # plain files: a default pyarrow.dataset listing sees exactly these rows
        location = client.credentials(namespace, table_name).location
        owner = owner_filesystem(stack_info)
        assert plain_listing_ids(owner, location) == list(range(100, 105))
    else:  # every job removed its intent (engine/job_intent.py) once it committed
        from lakegate_client.engine.job_intent import job_intents
        from lakegate_client.engine.stores.base import S3Location
        from lakegate_client.engine.stores.s3 import s3_client

        creds = client.credentials(namespace, table_name)
        assert job_intents(s3_client(creds), S3Location.parse(creds.location)) == []



@pytest.mark.parametrize("fmt", ["csv", "json"])
def test_csv_and_json_tables_are_read_with_one_partition_per_file(
    spark: SparkSession, client: Client, namespace: str, table_name: str, fmt: str
) -> None:
    for i in range(3):
        ids = [i * 10 + j for j in range(10)]
        part = pa.table({"id": ids, "name": [f"n{j}" for j in ids]})
        write_table(client, namespace, table_name, part, format=fmt, create=i == 0)
    df = spark.read.format("lakekeeper").option("table", f"{namespace}.{table_name}").load()
    assert df.rdd.getNumPartitions() == 3
    assert sorted(r.id for r in df.select("id").collect()) == list(range(30))


def test_writing_a_csv_table_from_spark_is_refused_with_a_clear_error(
    spark: SparkSession, client: Client, namespace: str, table_name: str
) -> None:
    write_table(client, namespace, table_name, pa.table({"id": [1]}), format="csv", create=True)
    with pytest.raises(Exception, match="read-only in Spark"):
        spark.range(3).write.format("lakekeeper").option(
            "table", f"{namespace}.{table_name}"
        ).mode("append").save()


def test_partitions_and_options_carry_no_secret(
    client: Client, gateway_url: str, stack_info: StackInfo, namespace: str, table_name: str
) -> None:
    from pyspark.sql.pandas.types import from_arrow_schema

    from lakegate_client.spark.datasource import LakekeeperDataSource

    data = pa.table({"id": [1, 2]})
    write_table(client, namespace, table_name, data, format="parquet", create=True)
    source = LakekeeperDataSource(
        {
            "table": f"{namespace}.{table_name}",
            "url": gateway_url,
            "warehouse": stack_info.warehouse.name,
        }
    )
    reader = source.reader(from_arrow_schema(pa.schema([("id", pa.int64())])))
    shipped = pickle.dumps((source, reader, list(reader.partitions())))
    creds = client.credentials(namespace, table_name, access="read")
    secrets = [v for k, v in creds.config.items() if "secret" in k or "token" in k or "key-id" in k]
    assert secrets, "the vended credential should carry keys to look for"
    for secret in secrets:
        assert secret.encode() not in shipped


def test_a_secret_given_as_an_option_is_refused(spark: SparkSession, namespace: str) -> None:
    with pytest.raises(Exception, match="not accepted"):
        spark.read.format("lakekeeper").option("table", f"{namespace}.x").option(
            "s3.session_token", "abc"
        ).load()
