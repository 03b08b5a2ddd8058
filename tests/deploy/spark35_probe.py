"""Run INSIDE the Spark 3.5 venv (tests/deploy/client_min_deps.py, install ``spark35``).

argv: gateway URL, warehouse, namespace, the client's source directory. Spark 3.5 has no Python
Data Source API, so this is the documented pattern (clients/python/README.md "Spark 3.5"): the
client's table functions inside ``mapInArrow`` (write) and ``mapPartitions`` (read), each task
asking the gateway itself. Prints one JSON line; exits non-zero on any failure.
"""

from __future__ import annotations

import json
import os
import sys
import uuid
from collections.abc import Iterator
from typing import Any

ROWS, TASKS = 1000, 4


def write_part(batches: Iterator[Any]) -> Iterator[Any]:
    """One task: append its rows as one file of the table (credentials from the gateway)."""
    import pyarrow as pa

    from lakegate_client import Client
    from lakegate_client.tables import write_table

    table = pa.Table.from_batches(list(batches))
    if table.num_rows:
        with Client() as client:
            write_table(client, os.environ["PROBE_NS"], os.environ["PROBE_TABLE"], table)
    yield pa.RecordBatch.from_pydict({"written": [table.num_rows]})


def read_all(_: Iterator[Any]) -> Iterator[Any]:
    """One task: read the whole table and yield its ids."""
    from lakegate_client import Client
    from lakegate_client.tables import read_table

    with Client() as client:
        table = read_table(client, os.environ["PROBE_NS"], os.environ["PROBE_TABLE"])
    yield from ((int(i),) for i in table.column("id").to_pylist())


def main(url: str, warehouse: str, namespace: str, client_src: str) -> int:
    name = f"spark35_{uuid.uuid4().hex[:8]}"
    # Python workers inherit the environment the JVM starts with.
    os.environ.update({
        "LAKEGATE_URL": url, "LAKEGATE_WAREHOUSE": warehouse, "PROBE_NS": namespace,
        "PROBE_TABLE": name, "PYTHONPATH": client_src, "PYSPARK_PYTHON": sys.executable,
        "SPARK_LOCAL_IP": "127.0.0.1",
    })
    import pyspark
    from pyspark.sql import SparkSession

    from lakegate_client import Client

    spark = (
        SparkSession.builder.master("local[2]").appName("lakegate-spark35")
        .config("spark.driver.host", "127.0.0.1").config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
        .config("spark.driver.memory", "512m")
        .config("spark.executorEnv.PYTHONPATH", client_src)
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    try:
        with Client(url, warehouse=warehouse) as client:
            client.create(namespace, name, format="parquet")
        df = spark.range(0, ROWS, numPartitions=TASKS)
        written = df.mapInArrow(write_part, "written long").groupBy().sum("written").first()[0]
        ids = (spark.sparkContext.parallelize([0], 1).mapPartitions(read_all)
               .toDF(["id"]).agg({"id": "sum"}).first()[0])
        count = spark.sparkContext.parallelize([0], 1).mapPartitions(read_all).count()
    finally:
        spark.stop()
        with Client(url, warehouse=warehouse) as client:
            client.drop(namespace, name, purge=True)
    print(json.dumps({"pyspark": pyspark.__version__, "written": int(written),
                      "read": int(count), "sum": int(ids)}))
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:5]))
