"""The demo's pipeline, compact, through the gateway: land, clean, aggregate, three formats."""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING

import pytest

from demo import data, duckdb_query, metrics, pipeline, report
from devstack.stack_info import StackInfo

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from lakegate_client import Client

pytestmark = [pytest.mark.e2e, pytest.mark.slow]


def test_pipeline_writes_and_reads_back_every_format_with_the_expected_rows(
    spark: SparkSession, client: Client, stack_info: StackInfo, namespace: str
) -> None:
    drop = data.generate(rows=1500, files=3, seed=11)
    before = metrics.read_counters(stack_info)
    suffix = uuid.uuid4().hex[:6]
    steps: list[str] = []
    run = pipeline.run(spark, client, namespace, drop, steps.append, suffix=suffix,
                       catalog_url=stack_info.gateway_url)
    after = metrics.read_counters(stack_info)

    by_format = {t.format: t for t in run.tables}
    assert set(by_format) == {"csv", "parquet", "delta", "lance", "iceberg"}
    assert by_format["csv"].rows_read == drop.raw_rows
    assert by_format["parquet"].rows_read == drop.country_days
    assert by_format["delta"].rows_read == drop.customers
    assert by_format["lance"].rows_read == drop.clean_rows
    assert by_format["iceberg"].rows_read == drop.clean_rows
    assert drop.clean_rows < drop.raw_rows  # the cleaning step had dirt to remove

    served = after.gateway_credential_total - before.gateway_credential_total
    upstream_calls = after.upstream_credential_calls - before.upstream_credential_calls
    assert served >= 1  # tasks and commits got their credentials from the gateway
    # One read and one write credential per table at most, however many tasks ran.
    assert upstream_calls <= 2 * len(run.tables) < run.tasks

    # The demo's last step: one DuckDB query over every table, through the same gateway.
    duck = duckdb_query.run(run, "local", stack_info.gateway_url, stack_info.warehouse.name,
                            lambda: metrics.read_counters(stack_info))
    assert duck.rows == {t.name: t.rows_written for t in run.tables}
    assert duck.gateway_credential_requests >= 1  # DuckDB's secrets came from the gateway
    # Every table's read credential is already cached by the Spark job's reads.
    assert duck.catalog_credential_calls == 0
    text = report.render(run, metrics.read_counters(stack_info), stack_info, elapsed_s=1.0,
                         duckdb=duck)
    assert "orders_clean" in text
    assert "/metrics" in text
    assert "DuckDB (one query over the 5 tables" in text
    assert report.summary(run, after, "local", duckdb=duck)["duckdb"]["rows"] == duck.rows
