"""A write job that fails part-way leaves the table readable at its previous state."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

POISON = 33  # the row whose task fails, after other tasks have written their files


def _frame(spark: SparkSession, start: int, count: int) -> DataFrame:
    from pyspark.sql import functions as F

    return spark.range(start, start + count, numPartitions=4).withColumn(
        "label", F.concat(F.lit("row-"), F.col("id").cast("string"))
    )


def _fail_on_poison(value: int) -> int:
    if value == POISON:
        raise RuntimeError("poisoned row: this task fails on purpose")
    return value


def _poisoned(spark: SparkSession) -> DataFrame:
    from pyspark.sql import functions as F

    # A lambda, not the annotated function: Spark 4.3 warns when it infers UDF types from hints.
    fail = F.udf(lambda value: _fail_on_poison(value), "long")
    return _frame(spark, 0, 40).withColumn("id", fail(F.col("id")))


def _ids(spark: SparkSession, qualified: str) -> list[int]:
    rows = spark.read.format("lakekeeper").option("table", qualified).load().select("id").collect()
    return sorted(r.id for r in rows)


@pytest.mark.parametrize(
    ("fmt", "mode"), [("parquet", "overwrite"), ("delta", "append"), ("lance", "overwrite")]
)
def test_a_failed_write_job_leaves_the_previous_state_readable(
    spark: SparkSession, namespace: str, table_name: str, fmt: str, mode: str
) -> None:
    qualified = f"{namespace}.{table_name}"
    _frame(spark, 1000, 12).write.format("lakekeeper").option("table", qualified).option(
        "format", fmt
    ).option("create", "true").mode("overwrite").save()
    before = _ids(spark, qualified)
    assert before == list(range(1000, 1012))

    with pytest.raises(Exception, match="poisoned row"):
        _poisoned(spark).write.format("lakekeeper").option("table", qualified).mode(mode).save()

    assert _ids(spark, qualified) == before
    # The table is not wedged: the next write commits normally.
    _frame(spark, 2000, 4).write.format("lakekeeper").option("table", qualified).mode(
        "append"
    ).save()
    assert _ids(spark, qualified) == before + list(range(2000, 2004))
