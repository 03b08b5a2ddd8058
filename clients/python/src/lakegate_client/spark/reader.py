"""Plan and read a generic table in Spark: one partition per file, Lance fragment or Delta file.

Why this shape: partitions carry only the table's identity, the gateway URL option and a file or
fragment id (never a secret); each task asks its node's gateway for a credential when it runs, so a
credential never travels through Spark and is always as fresh as the gateway's cache.
Planning pins what it saw (Lance version, Delta version, the directory table's file list), so every
task reads the same snapshot.

Delta tables are read file by file as plain Parquet: tables with partition columns or files outside
the table location are refused; deletion vectors and column mapping are not applied (delta-rs
writers, including this package's, produce neither by default).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from pyspark.sql.datasource import DataSourceReader, InputPartition

from lakegate_client.engine.formats import protocol_for
from lakegate_client.spark import worker_heap
from lakegate_client.spark.connection import table_credentials
from lakegate_client.tables.catalog import TableFormatError, TableInfo
from lakegate_client.tables.current_schema import table_schema
from lakegate_client.tables.directory import fs_path
from lakegate_client.tables.files import read_file
from lakegate_client.tables.schema_fit import conform_batch
from lakegate_client.tables.snapshot import current_snapshot

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql.types import StructType

    from lakegate_client import TableCredentials
    from lakegate_client.spark.options import SourceOptions


@dataclass(frozen=True)
class TablePartition(InputPartition):
    """One unit of work: a data file (path relative to the table) or a Lance fragment id."""

    index: int
    file: str | None = None
    fragment_id: int | None = None
    version: int | None = None


def arrow_schema(info: TableInfo, creds: TableCredentials) -> pa.Schema:
    """The table's Arrow schema, read from the data itself (the catalog stores none)."""
    schema = table_schema(info.format, creds)
    if schema is None:
        raise TableFormatError(f"table {info.name} has no data files yet, so no schema")
    return schema


def spark_schema(schema: pa.Schema) -> StructType:
    """Arrow → Spark types (large strings and the like map to their Spark equivalent)."""
    from pyspark.sql.pandas.types import from_arrow_schema

    return from_arrow_schema(schema)


def plan_partitions(info: TableInfo, creds: TableCredentials) -> list[TablePartition]:
    """List the snapshot's files or fragments on the driver."""
    if info.format == "lance":
        import lance

        dataset = lance.dataset(creds.location, storage_options=creds.lance_storage_options())
        return [
            TablePartition(index=i, fragment_id=frag.fragment_id, version=dataset.version)
            for i, frag in enumerate(dataset.get_fragments())
        ]
    if info.format == "delta":
        from deltalake import DeltaTable

        delta = DeltaTable(creds.location, storage_options=creds.delta_storage_options())
        if delta.metadata().partition_columns:
            raise TableFormatError("partitioned Delta tables are not supported by this reader")
        prefix = creds.location.rstrip("/") + "/"
        uris = delta.file_uris()
        outside = [u for u in uris if not u.startswith(prefix)]
        if outside:
            raise TableFormatError(f"Delta files outside the table location: {outside[:3]}")
        return [
            TablePartition(index=i, file=uri[len(prefix) :], version=delta.version())
            for i, uri in enumerate(uris)
        ]
    snapshot = current_snapshot(creds.pyarrow_filesystem(), fs_path(creds.location), info.format)
    return [
        TablePartition(index=i, file=rel, version=snapshot.version)
        for i, rel in enumerate(snapshot.files)
    ]


def read_partition(
    info: TableInfo, creds: TableCredentials, partition: TablePartition, target: pa.Schema
) -> Iterator[pa.RecordBatch]:
    """Decode one partition and conform it to the schema Spark planned with."""
    if info.format == "lance":
        import lance

        dataset = lance.dataset(
            creds.location, version=partition.version, storage_options=creds.lance_storage_options()
        )
        if partition.fragment_id is None:
            raise TableFormatError("a Lance partition without a fragment id")
        fragment = dataset.get_fragment(partition.fragment_id)
        if fragment is None:
            raise TableFormatError(
                f"Lance fragment {partition.fragment_id} is missing at version {partition.version}"
            )
        for batch in fragment.to_batches(columns=target.names):
            yield conform_batch(batch, target)
        return
    if partition.file is None:
        raise TableFormatError("a file partition without a file")
    fs, root = creds.pyarrow_filesystem(), fs_path(creds.location)
    fmt = "parquet" if info.format == "delta" else info.format
    table = read_file(fs, f"{root}/{partition.file}", fmt)
    for batch in table.to_batches():  # a file older than a column mergeSchema added: nulls
        yield conform_batch(batch, target)


class LakekeeperReader(DataSourceReader):
    """Driver: plan partitions. Executor: fetch a read credential, yield Arrow batches."""

    def __init__(self, opts: SourceOptions, info: TableInfo, schema: StructType) -> None:
        self._opts = opts
        self._info = info
        self._schema = schema

    def partitions(self) -> Sequence[InputPartition]:
        """Planned in a reused Python worker of the driver (``worker_heap.settling``)."""
        with worker_heap.settling(self._opts.freeze_worker_heap):
            return self._partitions()

    def _partitions(self) -> Sequence[InputPartition]:
        creds = table_credentials(self._opts, "read", self._info.location)
        def writer() -> TableCredentials:
            return table_credentials(self._opts, "write", self._info.location)

        # a crashed plain commit is finished, not read torn; a crashed Delta or Lance job's
        # files are removed
        protocol_for(self._info.format).finish_abandoned(creds, writer)
        return plan_partitions(self._info, creds)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        from pyspark.sql.pandas.types import to_arrow_schema

        if not isinstance(partition, TablePartition):
            raise TableFormatError(f"unexpected partition {type(partition).__name__}")
        target = to_arrow_schema(self._schema)
        # The driver's identity travels with every task (docs/contracts.md "Table identity").
        creds = table_credentials(self._opts, "read", self._info.location)
        yield from read_partition(self._info, creds, partition, target)
