"""Upstream credential calls do not grow with the number of Spark tasks.

Each table is read for the first time with a cold gateway cache, so every task that needs a
credential would cost one catalog call without the gateway. With it, a table costs one upstream
call however many tasks (partitions) read it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pyarrow as pa
import pytest

from lakegate_client.io import write_table

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from lakegate_client import Client
    from tests.e2e.conftest import Upstream

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

CREDENTIAL_OP = "load_generic_table_credentials"


def _table_with_files(client: Client, namespace: str, name: str, files: int) -> None:
    for i in range(files):
        part = pa.table({"id": list(range(i * 100, i * 100 + 100)), "v": [float(i)] * 100})
        write_table(client, namespace, name, part, format="parquet", create=i == 0)


def _upstream_calls_for_a_cold_read(
    spark: SparkSession, upstream: Upstream, namespace: str, name: str, tasks: int
) -> int:
    upstream.invalidate_gateway_cache()
    before = upstream.catalog_stats().get(CREDENTIAL_OP, 0)
    df = spark.read.format("lakekeeper").option("table", f"{namespace}.{name}").load()
    assert df.rdd.getNumPartitions() == tasks
    assert df.count() == tasks * 100
    return upstream.catalog_stats().get(CREDENTIAL_OP, 0) - before


def test_upstream_credential_calls_do_not_grow_with_the_number_of_tasks(
    spark: SparkSession, client: Client, upstream: Upstream, namespace: str, table_name: str
) -> None:
    few, many = f"{table_name}_few", f"{table_name}_many"
    _table_with_files(client, namespace, few, 2)
    _table_with_files(client, namespace, many, 8)

    calls_few = _upstream_calls_for_a_cold_read(spark, upstream, namespace, few, 2)
    calls_many = _upstream_calls_for_a_cold_read(spark, upstream, namespace, many, 8)

    assert calls_few == calls_many
    assert 1 <= calls_many <= 2  # one read credential per table (a refresh race may add one)
