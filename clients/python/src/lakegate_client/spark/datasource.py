"""The PySpark (4.x) Python Data Source ``lakekeeper``: Lakekeeper generic tables through Lakegate.

Usage::

    from lakegate_client.spark import register
    register(spark)
    df = spark.read.format("lakekeeper").option("table", "ns.orders").load()
    df.write.format("lakekeeper").option("table", "ns.out").option("format", "delta") \\
        .option("create", "true").mode("overwrite").save()

Options: ``table`` (``"ns.table"``, ``"a.b.table"``; or ``namespace`` + ``table``), ``warehouse``
(name or id; default ``$LAKEGATE_WAREHOUSE``), ``url`` (gateway; default ``$LAKEGATE_URL`` of the
process that runs the task, i.e. its node's gateway), ``format`` (for a write that creates the
table; checked against the table otherwise), ``create`` (``true``: create a missing table),
``accept_single_writer_risk`` (``true``: write even to a store that ignores conditional PUTs,
which the writer otherwise refuses before writing anything; only with one writer at a time).
Reads: parquet, csv, json, delta, lance. Writes (append, overwrite): parquet, delta, lance.
Iceberg tables: ``.option("format", "iceberg")`` (spark/iceberg.py; plus ``catalog_url``, the
gateway's HTTP address for the driver's pyiceberg catalog calls).

Why the driver-side methods call the gateway too: Spark runs ``schema()``, ``partitions()`` and
``commit()`` in Python workers of the driver, which are just more processes on a node with a
gateway. Everything here pickles: heavy imports happen inside methods.
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING

from pyspark.sql.datasource import DataSource

from lakegate_client import tables
from lakegate_client.spark import iceberg
from lakegate_client.spark.committer import lance_version, s3_client
from lakegate_client.spark.connection import client_for, table_credentials
from lakegate_client.spark.faults import Faults
from lakegate_client.spark.options import SourceOptions
from lakegate_client.spark.reader import LakekeeperReader, arrow_schema, spark_schema
from lakegate_client.spark.writer import WRITABLE_FORMATS, LakekeeperWriter, WritePlan
from lakegate_client.tables.conditional_writes import process_probe
from lakegate_client.tables.directory import fs_path
from lakegate_client.tables.plain_commit import plan_plain
from lakegate_client.tables.snapshot import convert_to_plain
from lakegate_client.tables.staged import S3Location

if TYPE_CHECKING:
    from pyspark.sql.types import StructType

SOURCE_NAME = "lakekeeper"


class LakekeeperDataSource(DataSource):
    """Batch reads and writes of one generic table per DataFrame operation."""

    @classmethod
    def name(cls) -> str:
        return SOURCE_NAME

    @property
    def _opts(self) -> SourceOptions:
        return SourceOptions.parse(self.options)

    def _describe(self) -> tables.TableInfo:
        opts = self._opts
        return tables.describe_table(
            client_for(opts.url), opts.namespace, opts.table, warehouse=opts.warehouse
        )

    def schema(self) -> StructType:
        if self._opts.iceberg:
            return iceberg.spark_schema_of(iceberg.load_table(self._opts))
        info = self._describe()
        return spark_schema(arrow_schema(info, table_credentials(self._opts, "read")))

    def reader(self, schema: StructType) -> LakekeeperReader | iceberg.IcebergReader:
        if self._opts.iceberg:
            return iceberg.IcebergReader(self._opts, iceberg.load_table(self._opts), schema)
        return LakekeeperReader(self._opts, self._describe(), schema)

    def writer(
        self, schema: StructType, overwrite: bool
    ) -> LakekeeperWriter | iceberg.IcebergWriter:
        from pyspark.sql.pandas.types import to_arrow_schema

        opts = self._opts
        if opts.iceberg:
            return iceberg.iceberg_writer(opts, to_arrow_schema(schema), overwrite)
        if opts.format is not None and opts.format not in WRITABLE_FORMATS:  # before creating
            raise tables.TableFormatError(f"{opts.format!r} tables are read-only in Spark")
        info = tables.ensure_table(
            client_for(opts.url),
            opts.namespace,
            opts.table,
            fmt=opts.format,
            create=opts.create,
            warehouse=opts.warehouse,
        )
        if info.format not in WRITABLE_FORMATS:
            raise tables.TableFormatError(f"{info.format!r} tables are read-only in Spark")
        creds = table_credentials(opts, "write")
        if info.format in tables.DIRECTORY_FORMATS:  # an old-layout table becomes plain files first
            convert_to_plain(creds.pyarrow_filesystem(), fs_path(creds.location), info.format)
        staged = creds.storage == "s3" and info.format != "lance"
        plain = None
        if staged and info.format in tables.DIRECTORY_FORMATS:
            s3, where = s3_client(creds), S3Location.parse(creds.location)
            process_probe().ensure(s3, where.bucket, where.prefix,
                                   accept_risk=opts.accept_single_writer_risk)
            plain = plan_plain(s3, where, info.format, overwrite=overwrite)
        elif creds.storage == "s3" and info.format == "lance":  # create claim, attempt ledger
            where = S3Location.parse(creds.location)
            process_probe().ensure(s3_client(creds), where.bucket, where.prefix,
                                   accept_risk=opts.accept_single_writer_risk)
        plan = WritePlan(
            opts=opts,
            info=info,
            overwrite=overwrite,
            write_id=uuid.uuid4().hex,
            read_version=lance_version(creds) if info.format == "lance" else None,
            staged=staged,
            plain=plain,
            faults=Faults.parse(opts.test_fault),
        )
        return LakekeeperWriter(plan, to_arrow_schema(schema))
