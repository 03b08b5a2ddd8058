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
which the writer otherwise refuses before writing anything; only with one writer at a time),
``mergeSchema`` / ``overwriteSchema`` (``true``: evolve or replace the table's schema where its
format allows; planning checks a write's schema against the table's: ``tables/schema_fit.py``).
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
from lakegate_client.engine import stores
from lakegate_client.engine.conditional_writes import process_probe
from lakegate_client.engine.formats import protocol_for
from lakegate_client.engine.protocol import Job
from lakegate_client.engine.stores.base import S3Location
from lakegate_client.spark import iceberg, worker_heap
from lakegate_client.spark.connection import client_for, table_credentials
from lakegate_client.spark.faults import Faults
from lakegate_client.spark.options import SourceOptions
from lakegate_client.spark.reader import LakekeeperReader, arrow_schema, spark_schema
from lakegate_client.spark.writer import WRITABLE_FORMATS, LakekeeperWriter, WritePlan
from lakegate_client.tables.current_schema import table_schema
from lakegate_client.tables.delta_schema import add_delta_columns
from lakegate_client.tables.directory import fs_path
from lakegate_client.tables.planning_refusal import undone_on_refusal
from lakegate_client.tables.schema_fit import check_schema_options, fit_schema
from lakegate_client.tables.snapshot import convert_to_plain

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

    # Spark runs these in reused Python workers of the driver: each call ends by keeping the
    # worker's long-lived heap out of the collection that follows it (``worker_heap.settling``)

    def schema(self) -> StructType:
        opts = self._opts
        with worker_heap.settling(opts.freeze_worker_heap):
            if opts.iceberg:
                return iceberg.spark_schema_of(iceberg.load_table(opts))
            info = self._describe()
            return spark_schema(arrow_schema(info, table_credentials(opts, "read")))

    def reader(self, schema: StructType) -> LakekeeperReader | iceberg.IcebergReader:
        opts = self._opts
        with worker_heap.settling(opts.freeze_worker_heap):
            if opts.iceberg:
                table = iceberg.load_table(opts)
                if iceberg.recover_iceberg_jobs(opts, table.location(), reading=True):
                    table = iceberg.load_table(opts)
                return iceberg.IcebergReader(opts, table, schema)
            return LakekeeperReader(opts, self._describe(), schema)

    def writer(
        self, schema: StructType, overwrite: bool
    ) -> LakekeeperWriter | iceberg.IcebergWriter:
        opts = self._opts
        with worker_heap.settling(opts.freeze_worker_heap):
            return self._writer(opts, schema, overwrite)

    def _writer(
        self, opts: SourceOptions, schema: StructType, overwrite: bool
    ) -> LakekeeperWriter | iceberg.IcebergWriter:
        from pyspark.sql.pandas.types import to_arrow_schema

        if opts.iceberg:
            return iceberg.iceberg_writer(opts, to_arrow_schema(schema), overwrite)
        if opts.format is not None and opts.format not in WRITABLE_FORMATS:  # before creating
            raise tables.TableFormatError(f"{opts.format!r} tables are read-only in Spark")
        if opts.format is not None:  # schema options the format lacks: before creating too
            check_schema_options(opts.format, overwrite=overwrite, merge_schema=opts.merge_schema,
                                 overwrite_schema=opts.overwrite_schema)
        client, created = client_for(opts.url), list[tables.TableInfo]()
        info = tables.ensure_table(client, opts.namespace, opts.table, fmt=opts.format,
                                   create=opts.create, warehouse=opts.warehouse,
                                   on_create=created.append)
        store = None
        with undone_on_refusal(created, lambda t: client.drop(
                list(t.namespace), t.name, warehouse=opts.warehouse)):  # a refusal: not created
            if info.format not in WRITABLE_FORMATS:
                raise tables.TableFormatError(f"{info.format!r} tables are read-only in Spark")
            creds = table_credentials(opts, "write")
            if info.format == "delta":  # a store deltalake cannot reach: refused before writing
                creds.delta_storage_options()
            fit = fit_schema(table_schema(info.format, creds), to_arrow_schema(schema),
                             fmt=info.format, table=opts.qualified_name, overwrite=overwrite,
                             merge_schema=opts.merge_schema,
                             overwrite_schema=opts.overwrite_schema)
            if stores.stages(creds):
                # a plain table's commit marker, every job's intent, Lance's create claim and
                # ledger (S3, ADLS, GCS): all on a store the probe proved
                store, where = stores.table_store(creds), S3Location.parse(creds.location)
                process_probe().ensure(store, where.bucket, where.prefix,
                                       accept_risk=opts.accept_single_writer_risk)
        if info.format == "delta":  # mergeSchema's columns, before any task writes
            add_delta_columns(creds, fit)
        if info.format in tables.DIRECTORY_FORMATS:  # an old-layout table becomes plain files first
            convert_to_plain(creds.pyarrow_filesystem(), fs_path(creds.location), info.format)
        job = protocol_for(info.format).plan(
            creds, Job(fmt=info.format, write_id=uuid.uuid4().hex, overwrite=overwrite,
                       staged=store is not None and info.format != "lance"), store)
        plan = WritePlan(
            opts=opts,
            info=info,
            overwrite=overwrite,
            write_id=job.write_id,
            read_version=job.read_version,
            staged=job.staged,
            plain=job.plain,
            faults=Faults.parse(opts.test_fault),
            seen=job.seen,
        )
        return LakekeeperWriter(plan, fit.schema)

