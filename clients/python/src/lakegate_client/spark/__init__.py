"""``lakegate_client.spark``: the ``lakekeeper`` PySpark data source (needs ``pyspark>=4``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from lakegate_client.spark.datasource import SOURCE_NAME, LakekeeperDataSource

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["SOURCE_NAME", "LakekeeperDataSource", "register"]


def register(spark: SparkSession) -> None:
    """Register the data source with a session, so ``format("lakekeeper")`` resolves."""
    spark.dataSource.register(LakekeeperDataSource)
