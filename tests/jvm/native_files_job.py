"""Spark's own Parquet, CSV and Delta readers and writers through lakegate-hadoop (in .venv-jvm).

`python native_files_job.py <spec.json> <out.json>`: one SparkSession (local[2]) with the
verified jar set plus lakegate-hadoop on spark.jars. The first spec table gets Parquet, CSV and
Delta written with its write options and read back with its read options (every S3A request
signed with the credential the executor JVM's provider got from the gateway), the second one
Parquet; then what must fail: a write with the read credential, and a read of the other table's
files with the first table's credential. Each step's result or error class goes to out.json for
tests/jvm/test_native_files.py. Only pyspark and the standard library.
"""

from __future__ import annotations

import json
import sys
import time
from typing import Any

from pyspark.sql import DataFrame, SparkSession

ROWS = 1000


def session(jars: list[str]) -> SparkSession:
    return (
        SparkSession.builder.master("local[2]").appName("lakegate-jvm-native")
        .config("spark.jars", ",".join(jars))
        .config("spark.ui.enabled", "false")
        # The GCS connector's vectored read needs a Hadoop method Spark 4.1's client lacks.
        .config("spark.hadoop.parquet.hadoop.vectored.io.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.databricks.delta.snapshotPartitions", "2")
        .config("spark.sql.extensions", "io.delta.sql.DeltaSparkSessionExtension")
        .config("spark.sql.catalog.spark_catalog",
                "org.apache.spark.sql.delta.catalog.DeltaCatalog")
        .getOrCreate()
    )


def _error(exc: BaseException) -> str:
    text = str(exc)
    for marker in ("AccessDenied", "Forbidden", "403"):
        if marker in text:
            return marker
    return type(exc).__name__ + ": " + text.splitlines()[0][:300]


def _frame(spark: SparkSession) -> DataFrame:
    return spark.range(0, ROWS, numPartitions=2).selectExpr(
        "id", "concat('row-', cast(id AS STRING)) AS label")


def run_table(spark: SparkSession, t: dict[str, Any], other: dict[str, Any],
              formats: bool) -> dict[str, Any]:
    out: dict[str, Any] = {"took_s": {}}
    base, write, read = t["path"], t["write"], t["read"]
    start = time.perf_counter()

    def lap(step: str) -> None:
        nonlocal start
        now = time.perf_counter()
        out["took_s"][step] = round(now - start, 2)
        start = now

    _frame(spark).write.options(**write).mode("overwrite").parquet(base + "/parquet")
    lap("parquet_write")
    df = spark.read.options(**read).parquet(base + "/parquet")
    out["parquet"] = [df.count(), df.selectExpr("sum(id)").first()[0]]
    lap("parquet_read")
    if not formats:
        return out
    csv = _frame(spark).write.options(**write).mode("overwrite").option("header", "true")
    csv.csv(base + "/csv")
    df = spark.read.options(**read).option("header", "true").csv(base + "/csv")
    out["csv"] = [df.count(), df.selectExpr("sum(cast(id AS BIGINT))").first()[0]]
    lap("csv")
    delta = base + "/delta"
    _frame(spark).write.format("delta").options(**write).mode("overwrite").save(delta)
    _frame(spark).limit(10).write.format("delta").options(**write).mode("append").save(delta)
    df = spark.read.format("delta").options(**read).load(base + "/delta")
    out["delta"] = [df.count(), df.selectExpr("sum(id)").first()[0]]
    lap("delta")
    try:
        _frame(spark).write.options(**read).mode("append").parquet(base + "/parquet")
        out["write_with_read_credential"] = "written"
    except Exception as exc:  # noqa: BLE001 - the refusal is the result
        out["write_with_read_credential"] = _error(exc)
    lap("refused_write")
    try:
        theirs = spark.read.options(**read).parquet(other["path"] + "/parquet")
        out["read_other_table"] = theirs.count()
    except Exception as exc:  # noqa: BLE001 - the refusal is the result
        out["read_other_table"] = _error(exc)
    lap("refused_read")
    return out


def time_reads(spark: SparkSession, t: dict[str, Any], repeats: int) -> dict[str, float]:
    """Median wall time of a small Parquet read, with Hadoop's filesystem cache off (per-table
    options) and on (one filesystem per bucket: what a single-table job could use)."""
    out = {}
    for label, cached in (("cache_off", "true"), ("cache_on", "false")):
        opts = {**t["read"], "fs.s3a.impl.disable.cache": cached}
        times = []
        for _ in range(repeats):
            start = time.perf_counter()
            spark.read.options(**opts).parquet(t["path"] + "/parquet").count()
            times.append(time.perf_counter() - start)
        out[label] = sorted(times)[len(times) // 2]
    return out


def main(spec_path: str, out_path: str) -> int:
    with open(spec_path, encoding="utf-8") as fh:
        spec = json.load(fh)
    spark = session(spec["jars"])
    spark.sparkContext.setLogLevel("ERROR")
    tables = spec["tables"]
    results: dict[str, Any] = {}
    try:
        # The second table only holds Parquet files for the first one's refused read.
        other = run_table(spark, tables[1], tables[0], formats=False)
        results["tables"] = [run_table(spark, tables[0], tables[1], formats=True), other]
        if spec.get("repeats", 5):
            results["read_s"] = time_reads(spark, tables[0], spec.get("repeats", 5))
    finally:
        spark.stop()
    with open(out_path, "w", encoding="utf-8") as fh:
        json.dump(results, fh)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
