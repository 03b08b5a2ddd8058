"""A local SparkSession for the dev stack's users (the demo, the long job, the benches, the
hardening suites and the e2e tests): loopback only, its Python workers on this interpreter, the
``lakekeeper`` data source registered."""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def spark_session(
    master: str = "local[2]",
    app_name: str = "lakegate-demo",
    conf: Mapping[str, str] | None = None,
) -> SparkSession:
    """A loopback-only session on ``master`` (``local[N]`` or ``spark://``) whose Python workers
    run this interpreter; ``conf`` adds settings (e.g. a cluster's executor sizes)."""
    from pyspark.sql import SparkSession

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    # The JVM reads it at start: without it Spark takes the machine's external interface as this
    # host ("hostname resolves to a loopback address; using <ip> instead") and advertises it.
    os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
    builder = (
        SparkSession.builder.master(master)
        .appName(app_name)
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.driver.memory", "768m")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "8")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.python.worker.reuse", "true")
    )
    for key, value in (conf or {}).items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    from lakegate_client.spark import register

    register(spark)
    return spark
