"""Write a Spark DataFrame into a generic table: executors write files, the driver commits.

Why split this way: only one process can know which task attempts succeeded, so the driver finishes
the write; a failed job leaves the table at its previous state (Delta and Lance atomically, Parquet
once ``abort`` has deleted the job's files):

- ``parquet``: tasks write plain ``part-<write-id>-*.parquet`` files under the table location; the
  driver's commit deletes what they replace (on overwrite) and any file of this job that no task
  reported (a failed or duplicate attempt), see ``lakegate_client.tables.directory``. Not atomic:
  a reader listing during the job sees new files as they land.
- ``delta``: tasks write Parquet files at the table root; the driver commits their add actions in
  one Delta transaction (creating the table on the first write).
- ``lance``: tasks write fragments (``write_fragments``); the driver commits one Append or
  Overwrite against the version it planned with.

Each task asks its node's gateway for a write credential; the commit (which Spark runs in a
separate Python process) asks too. Commit messages carry paths, sizes and row counts, never keys.
``abort`` deletes every file of a failed Parquet or Delta job, found by its write id (best effort;
for Delta they are invisible either way); uncommitted Lance fragment files are left for Lance's
own cleanup.
"""

from __future__ import annotations

import itertools
import json
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

from pyspark.sql.datasource import DataSourceArrowWriter, WriterCommitMessage

from lakegate_client.spark.connection import table_credentials
from lakegate_client.tables.catalog import TableFormatError, TableInfo
from lakegate_client.tables.directory import (
    delete_files,
    fs_path,
    list_files,
    new_data_file,
    replace_files,
    write_id_of,
)
from lakegate_client.tables.files import write_parquet_batches

if TYPE_CHECKING:
    import pyarrow as pa

    from lakegate_client import TableCredentials
    from lakegate_client.spark.options import SourceOptions

WRITABLE_FORMATS: tuple[str, ...] = ("parquet", "delta", "lance")


@dataclass(frozen=True)
class WrittenFile:
    """One data file a task wrote (path relative to the table location)."""

    path: str
    size: int
    rows: int
    modified_ms: int


@dataclass(frozen=True)
class TaskResult(WriterCommitMessage):
    """What one task hands to the driver: files, or Lance fragment metadata as JSON."""

    partition: int
    files: tuple[WrittenFile, ...] = ()
    fragments: tuple[str, ...] = field(default=())
    rows: int = 0


@dataclass(frozen=True)
class WritePlan:
    """Fixed on the driver before any task runs; identical in every task."""

    opts: SourceOptions
    info: TableInfo
    overwrite: bool
    write_id: str
    read_version: int | None


class LakekeeperWriter(DataSourceArrowWriter):
    """Arrow writer for parquet, delta and lance generic tables."""

    def __init__(self, plan: WritePlan, schema: pa.Schema) -> None:
        if plan.info.format not in WRITABLE_FORMATS:
            raise TableFormatError(
                f"the Spark writer supports {', '.join(WRITABLE_FORMATS)}, not {plan.info.format!r}"
            )
        self._plan = plan
        self._schema = schema

    def write(self, iterator: Iterator[pa.RecordBatch]) -> TaskResult:
        """Stream the batches into one Parquet file or Lance fragments (never all in memory)."""
        from pyspark import TaskContext

        context = TaskContext.get()
        partition = context.partitionId() if context is not None else 0
        non_empty = (b for b in iterator if b.num_rows)
        first = next(non_empty, None)
        if first is None:  # nothing to write: no file, no gateway call
            return TaskResult(partition=partition)
        counter = _RowCounter()
        batches = counter.count(self._conform(b) for b in itertools.chain([first], non_empty))
        creds = table_credentials(self._plan.opts, "write", self._plan.info.location)
        if self._plan.info.format == "lance":
            fragments = self._write_lance(creds, batches)
            return TaskResult(partition=partition, fragments=fragments, rows=counter.rows)
        path, size = self._write_parquet(creds, partition, batches)
        written = WrittenFile(path=path, size=size, rows=counter.rows, modified_ms=_now_ms())
        return TaskResult(partition=partition, files=(written,), rows=counter.rows)

    def _conform(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        return batch if batch.schema.equals(self._schema) else batch.cast(self._schema)

    def _write_parquet(
        self, creds: TableCredentials, partition: int, batches: Iterator[pa.RecordBatch]
    ) -> tuple[str, int]:
        """One Parquet file at the table's root (Delta too): its path there and its size."""
        fs, root = creds.pyarrow_filesystem(), fs_path(creds.location)
        rel = new_data_file(self._plan.write_id, partition, "parquet")
        return rel, write_parquet_batches(fs, f"{root}/{rel}", self._schema, batches)

    def _write_lance(
        self, creds: TableCredentials, batches: Iterator[pa.RecordBatch]
    ) -> tuple[str, ...]:
        """Lance fragments (uncommitted), as the JSON the driver's commit takes."""
        import pyarrow as pa
        from lance.fragment import write_fragments

        fragments = write_fragments(
            pa.RecordBatchReader.from_batches(self._schema, batches),
            creds.location,
            schema=self._schema,
            storage_options=creds.lance_storage_options(),
        )
        return tuple(json.dumps(f.to_json()) for f in fragments)

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        results = [m for m in messages if isinstance(m, TaskResult)]
        creds = table_credentials(self._plan.opts, "write", self._plan.info.location)
        fmt = self._plan.info.format
        if fmt == "lance":
            self._commit_lance(creds, results)
        elif fmt == "delta":
            self._commit_delta(creds, results)
        else:
            replace_files(
                creds.pyarrow_filesystem(),
                fs_path(creds.location),
                "parquet",
                [f.path for r in results for f in r.files],
                overwrite=self._plan.overwrite,
                write_id=self._plan.write_id,
            )

    def _commit_delta(self, creds: TableCredentials, results: list[TaskResult]) -> None:
        from deltalake import DeltaTable, Schema
        from deltalake.transaction import AddAction, RemoveAction, create_table_with_add_actions

        options = creds.delta_storage_options()
        adds = [
            AddAction(
                path=f.path,
                size=f.size,
                partition_values={},
                modification_time=f.modified_ms,
                data_change=True,
                stats=json.dumps({"numRecords": f.rows}),
            )
            for r in results
            for f in r.files
        ]
        mode: Literal["overwrite", "append"] = "overwrite" if self._plan.overwrite else "append"
        if DeltaTable.is_deltatable(creds.location, storage_options=options):
            table = DeltaTable(creds.location, storage_options=options)
            actions: list[AddAction | RemoveAction] = [*adds]  # the API takes the wider list type
            table.create_write_transaction(actions, mode=mode, schema=self._schema)
        else:
            create_table_with_add_actions(
                creds.location,
                Schema.from_arrow(self._schema),
                adds,
                mode=mode,
                storage_options=options,
            )

    def _commit_lance(self, creds: TableCredentials, results: list[TaskResult]) -> None:
        import lance
        from lance.fragment import FragmentMetadata

        fragments = [FragmentMetadata.from_json(f) for r in results for f in r.fragments]
        version = self._plan.read_version
        operation: lance.LanceOperation.BaseOperation
        if version is None or self._plan.overwrite:
            operation = lance.LanceOperation.Overwrite(self._schema, fragments)
        else:
            operation = lance.LanceOperation.Append(fragments)
        lance.LanceDataset.commit(
            creds.location,
            operation,
            read_version=version,
            storage_options=creds.lance_storage_options(),
        )

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        if self._plan.info.format == "lance":
            return
        creds = table_credentials(self._plan.opts, "write", self._plan.info.location)
        fs, root = creds.pyarrow_filesystem(), fs_path(creds.location)
        reported = {f.path for m in messages if isinstance(m, TaskResult) for f in m.files}
        mine = {rel for rel in list_files(fs, root) if write_id_of(rel) == self._plan.write_id}
        delete_files(fs, root, sorted(reported | mine))


class _RowCounter:
    """Counts rows as batches stream past (the writers consume the iterator themselves)."""

    def __init__(self) -> None:
        self.rows = 0

    def count(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            self.rows += batch.num_rows
            yield batch


def _now_ms() -> int:
    return int(time.time() * 1000)
