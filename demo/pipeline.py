"""The demo's pipeline: land → clean and aggregate in Spark → write four formats → verify.

Why this shape: it exercises every path a real job takes through Lakegate. The driver talks to the
gateway to create and plan tables; every Spark task (in forked Python workers) asks its node's
gateway for a credential; the commits run in yet another Python process. Nothing here ever sees a
storage key except through ``TableCredentials``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from demo.data import Drop
from lakegate_client import Client
from lakegate_client.io import write_table

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

SOURCE = "lakekeeper"


class PipelineError(RuntimeError):
    """A step of the pipeline produced a wrong result (row counts that do not match)."""


@dataclass(frozen=True)
class TableResult:
    """One table the pipeline wrote and read back."""

    name: str
    format: str
    rows_written: int
    rows_read: int
    expected: int
    write_tasks: int
    read_tasks: int


@dataclass
class PipelineRun:
    """Everything the report needs from the pipeline."""

    tables: list[TableResult] = field(default_factory=list)

    @property
    def tasks(self) -> int:
        return sum(t.write_tasks + t.read_tasks for t in self.tables)


def land_raw(client: Client, namespace: str, table: str, drop: Drop) -> None:
    """Land the drop's raw files as the CSV files of a new generic table (one commit)."""
    write_table(client, namespace, table, drop.files, format="csv", create=True)


def clean(raw: DataFrame) -> DataFrame:
    """De-duplicate deliveries, drop lines with no customer or no quantity, tidy the values."""
    from pyspark.sql import functions as F

    return (
        raw.dropDuplicates(["order_id"])
        .where(F.col("customer_id").isNotNull() & (F.trim(F.col("customer_id")) != ""))
        .where(F.col("quantity") > 0)
        .withColumn("country", F.upper(F.trim(F.col("country"))))
        .withColumn("order_date", F.to_date(F.col("order_date")))
        .withColumn("amount", F.round(F.col("quantity") * F.col("unit_price"), 2))
    )


def daily_revenue(orders: DataFrame) -> DataFrame:
    from pyspark.sql import functions as F

    return orders.groupBy("order_date", "country").agg(
        F.count("*").alias("orders"), F.round(F.sum("amount"), 2).alias("revenue")
    )


def customer_stats(orders: DataFrame) -> DataFrame:
    from pyspark.sql import functions as F

    return orders.groupBy("customer_id").agg(
        F.count("*").alias("orders"),
        F.round(F.sum("amount"), 2).alias("spent"),
        F.min("order_date").alias("first_order"),
        F.max("order_date").alias("last_order"),
    )


def rows_and_tasks(df: DataFrame) -> tuple[int, int]:
    """Row count and number of non-empty partitions, in one Spark job."""
    from pyspark.sql import functions as F

    counts = df.groupBy(F.spark_partition_id().alias("p")).count().collect()
    return sum(int(r["count"]) for r in counts), len(counts)


def _iceberg_options(fmt: str, catalog_url: str | None) -> dict[str, str]:
    """An Iceberg table is named by its format on reads too, and the driver needs the gateway's
    HTTP address for pyiceberg (lakegate_client/spark/iceberg.py)."""
    if fmt != "iceberg":
        return {}
    return {"format": "iceberg", "catalog_url": catalog_url or ""}


def write_and_verify(
    spark: SparkSession,
    df: DataFrame,
    qualified: str,
    fmt: str,
    expected: int,
    partitions: int = 0,
    catalog_url: str | None = None,
) -> TableResult:
    """Write through the data source (creating the table), read it back, compare counts.

    ``partitions`` > 0 spreads the write over that many tasks (one file or fragment each).
    """
    iceberg = _iceberg_options(fmt, catalog_url)
    if partitions > 0:
        df = df.repartition(partitions)
    df = df.cache()
    rows, write_tasks = rows_and_tasks(df)
    if rows != expected:
        raise PipelineError(f"{qualified}: computed {rows} rows, expected {expected}")
    (
        df.write.format(SOURCE)
        .option("table", qualified)
        .option("format", fmt)
        .options(**iceberg)
        .option("create", "true")
        .mode("overwrite")
        .save()
    )
    df.unpersist()
    reader = spark.read.format(SOURCE).option("table", qualified).options(**iceberg)
    read, read_tasks = rows_and_tasks(reader.load())
    if read != rows:
        raise PipelineError(f"{qualified}: wrote {rows} rows but read back {read}")
    return TableResult(qualified, fmt, rows, read, expected, write_tasks, read_tasks)


def _all_orders(orders: DataFrame) -> DataFrame:
    return orders


@dataclass(frozen=True)
class Output:
    """One table the pipeline derives from the clean orders: add an entry to add a table kind."""

    name: str
    format: str
    build: Callable[[DataFrame], DataFrame]
    expected: Callable[[Drop], int]  # the row count a correct pipeline produces


OUTPUTS: tuple[Output, ...] = (
    Output("daily_revenue", "parquet", daily_revenue, lambda d: d.country_days),
    Output("customer_stats", "delta", customer_stats, lambda d: d.customers),
    Output("orders_clean", "lance", _all_orders, lambda d: d.clean_rows),
)
# Written only when the run knows the gateway's HTTP address (`run(catalog_url=...)`).
ICEBERG_OUTPUTS: tuple[Output, ...] = (
    Output("orders_iceberg", "iceberg", _all_orders, lambda d: d.clean_rows),
)
# The output formats each store runs: on GCS, deltalake takes no raw access token (its bundled
# object_store has no GCS bearer-token option).
STORAGE_FORMATS = {"gcs": frozenset({"parquet", "lance"})}


def run(
    spark: SparkSession,
    client: Client,
    namespace: str,
    drop: Drop,
    say: Callable[[str], None],
    *,
    suffix: str = "",
    partitions: int = 0,
    catalog_url: str | None = None,
    storage: str = "s3",
) -> PipelineRun:
    """The whole pipeline; raises ``PipelineError`` on a wrong result.

    ``suffix`` is appended to every table name (tests share one catalog between runs);
    ``partitions`` is the number of write tasks per output table (0: Spark's choice);
    ``catalog_url`` (the driver's gateway over HTTP) adds the Iceberg table; ``storage``
    (the warehouse's store) drops the outputs whose format it cannot run.
    """
    result = PipelineRun()
    raw_table = f"orders_raw{suffix}"
    raw_name = f"{namespace}.{raw_table}"
    files = len(drop.files)
    say(f"landing the raw CSV drop ({drop.raw_rows} lines in {files} files) as {raw_name}")
    land_raw(client, namespace, raw_table, drop)

    raw = spark.read.format(SOURCE).option("table", raw_name).load()
    raw_read, parts = rows_and_tasks(raw)
    if raw_read != drop.raw_rows:
        raise PipelineError(f"{raw_name}: landed {drop.raw_rows} lines but Spark read {raw_read}")
    result.tables.append(
        TableResult(raw_name, "csv", drop.raw_rows, raw_read, drop.raw_rows, 0, parts)
    )
    say(f"Spark read {raw_read} raw lines from {parts} partitions")

    orders = clean(raw).cache()
    allowed = STORAGE_FORMATS.get(storage)
    for output in (*OUTPUTS, *(ICEBERG_OUTPUTS if catalog_url else ())):
        name, fmt = output.name, output.format
        if allowed is not None and fmt not in allowed:
            say(f"skipping {name} ({fmt}): not runnable on {storage}")
            continue
        df, expected = output.build(orders), output.expected(drop)
        qualified = f"{namespace}.{name}{suffix}"
        say(f"writing {qualified} as {fmt} and reading it back")
        table = write_and_verify(spark, df, qualified, fmt, expected, partitions, catalog_url)
        result.tables.append(table)
        say(f"{qualified}: {table.rows_read} rows read back ({fmt}), as expected")
    orders.unpersist()
    return result
