"""Spark SQL on Iceberg through the gateway, Iceberg's Spark runtime unchanged (in .venv-jvm).

The SQL text is built from the spec's own table names (test-generated), hence S608 is off here.
`python iceberg_sql_job.py <spec.json> <out.json>`: one SparkSession (local[2]) whose catalog
`lake` is `org.apache.iceberg.spark.SparkCatalog`, `type=rest`, `uri=<gateway>/catalog`, vended
credentials. Per spec table it creates, inserts, reads, updates, deletes, merges and drops,
and records the rows and the catalog emulator's counters (`/_emulator/stats`) around each
phase into out.json, which tests/jvm/test_iceberg_spark_runtime.py asserts on. Only pyspark
and the standard library: this runs in the JVM path's own venv.
"""

from __future__ import annotations

import json
import sys
import urllib.request
from typing import Any

from pyspark.sql import SparkSession

# ruff: noqa: S608


def _stats(catalog_url: str) -> dict[str, int]:
    url = catalog_url + "/_emulator/stats"
    if not url.startswith("http://127.0.0.1:"):
        raise ValueError("the emulator is on loopback")
    with urllib.request.urlopen(url, timeout=10) as resp:  # noqa: S310 - checked above
        return {k: int(v) for k, v in json.load(resp).items()}


def _rows(spark: SparkSession, sql: str) -> list[list[Any]]:
    return [list(r) for r in spark.sql(sql).collect()]


def session(spec: dict[str, Any]) -> SparkSession:
    cat = "spark.sql.catalog.lake"
    builder = (
        SparkSession.builder.master("local[2]").appName("lakegate-jvm-iceberg")
        .config("spark.jars", ",".join(spec["jars"]))
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.sql.extensions",
                "org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions")
        .config(cat, "org.apache.iceberg.spark.SparkCatalog")
        .config(f"{cat}.type", "rest")
        .config(f"{cat}.uri", spec["gateway_url"] + "/catalog")
        .config(f"{cat}.warehouse", spec["warehouse"])
        .config(f"{cat}.header.X-Iceberg-Access-Delegation", "vended-credentials")
        .config(f"{cat}.header.X-Lakegate-Request", "1")
        # Spark's own table cache off: every statement loads the table from the REST catalog,
        # so Iceberg's RESTTableCache revalidates it (If-None-Match) at every step.
        .config(f"{cat}.cache-enabled", "false")
    )
    for key, value in spec.get("catalog_conf", {}).items():
        builder = builder.config(f"{cat}.{key}", value)
    return builder.getOrCreate()


def run_table(spark: SparkSession, spec: dict[str, Any], name: str) -> dict[str, Any]:
    t = f"lake.{spec['namespace']}.{name}"
    stats = spec["catalog_url"]
    out: dict[str, Any] = {"table": name, "stats": {"start": _stats(stats)}}
    spark.sql(f"CREATE TABLE {t} (id BIGINT, label STRING) USING iceberg")
    spark.range(0, 100, numPartitions=4).selectExpr(
        "id", "concat('row-', cast(id AS STRING)) AS label").writeTo(t).append()
    out["stats"]["written"] = _stats(stats)
    out["count"] = _rows(spark, f"SELECT count(*) FROM {t}")[0][0]
    for _ in range(3):
        out["sum"] = _rows(spark, f"SELECT sum(id) FROM {t}")[0][0]
    out["stats"]["read"] = _stats(stats)
    spark.sql(f"UPDATE {t} SET label = 'updated' WHERE id < 10")
    spark.sql(f"DELETE FROM {t} WHERE id >= 90")
    spark.sql(f"MERGE INTO {t} AS dst USING (SELECT id, 'merged' AS label FROM range(85, 95)) "
              f"AS src ON dst.id = src.id WHEN MATCHED THEN UPDATE SET dst.label = src.label "
              f"WHEN NOT MATCHED THEN INSERT *")
    out["labels"] = _rows(spark, f"SELECT label, count(*) FROM {t} GROUP BY label ORDER BY label")
    out["ids"] = _rows(spark, f"SELECT min(id), max(id), count(*) FROM {t}")[0]
    out["snapshots"] = _rows(spark, f"SELECT count(*) FROM {t}.snapshots")[0][0]
    out["stats"]["mutated"] = _stats(stats)
    spark.sql(f"DROP TABLE {t}")
    out["exists_after_drop"] = bool(
        _rows(spark, f"SHOW TABLES IN lake.{spec['namespace']} LIKE '{name}'"))
    out["stats"]["dropped"] = _stats(stats)
    return out


def main(spec_path: str, out_path: str) -> int:
    with open(spec_path, encoding="utf-8") as fh:
        spec = json.load(fh)
    spark = session(spec)
    spark.sparkContext.setLogLevel("WARN")
    results = {"spark": spark.version, "tables": []}
    try:
        for name in spec["tables"]:
            results["tables"].append(run_table(spark, spec, name))
    finally:
        spark.stop()
    with open(out_path, "w", encoding="utf-8") as fh:
        json.dump(results, fh)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
