"""``lakegate_client.spark``: the ``lakekeeper`` PySpark data source (needs ``pyspark>=4``).

The data source (and pyspark) is imported on first use. The commits it makes are the write
engine's (``lakegate_client.engine``), which ``read_table`` drives too, without pyspark.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from lakegate_client.spark.datasource import SOURCE_NAME, LakekeeperDataSource

__all__ = ["SOURCE_NAME", "LakekeeperDataSource", "register"]


def __getattr__(name: str) -> Any:
    if name in ("SOURCE_NAME", "LakekeeperDataSource"):
        from lakegate_client.spark import datasource

        return getattr(datasource, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def register(spark: SparkSession) -> None:
    """Register the data source with a session, so ``format("lakekeeper")`` resolves."""
    from lakegate_client.spark.datasource import LakekeeperDataSource

    spark.dataSource.register(LakekeeperDataSource)
