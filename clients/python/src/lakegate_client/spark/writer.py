"""Write a Spark DataFrame into a generic table: tasks stage data, the driver alone publishes it.

Why split this way: only the driver knows which task attempts Spark accepted, so only the driver
makes data visible (the format's commit protocol, ``engine/protocol.py``); a task never
writes a file a reader could see.

- ``parquet`` (plain table) and ``delta`` on S3 and ADLS: each task streams one Parquet file
  into a staged upload that it does not complete (``engine/staged.py``: an S3 multipart upload,
  ADLS uncommitted blocks) and reports key, upload id and part tags. A failed, duplicate or
  late attempt's upload is never completed, so its rows never appear; ``abort`` aborts the
  reported uploads. Plain tables commit under a conflict check
  (``engine/formats/plain.py``); Delta adds the files in one Delta transaction.
- Other storage: tasks write ``part-<write-id>-*`` files; commit and abort delete the job's
  unpublished ones (a reader listing a plain table during the job sees them as they land).
- ``lance``: tasks write fragments (``write_fragments``); the driver commits one Append or
  Overwrite (``engine/formats/lance.py``).

Each task asks its node's gateway for a write credential; the commit (which Spark runs in a
separate Python process) asks too. Commit messages carry paths, upload ids, sizes and row counts,
never keys. ``WritePlan.faults`` is the test-only fault hook (``faults.py``).
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from pyspark.sql.datasource import DataSourceArrowWriter, WriterCommitMessage

from lakegate_client.engine import attempts, jobs, stores
from lakegate_client.engine.formats import lance as lance_format
from lakegate_client.engine.formats import protocol_for
from lakegate_client.engine.formats.plain import CommitTiming
from lakegate_client.engine.job_intent import Seen
from lakegate_client.engine.protocol import Job, Reported
from lakegate_client.engine.staged import abort_uploads, stage_parquet
from lakegate_client.engine.stores.base import PendingUpload, S3Location
from lakegate_client.spark import worker_heap
from lakegate_client.spark.connection import table_credentials
from lakegate_client.spark.faults import Faults
from lakegate_client.tables.catalog import DIRECTORY_FORMATS, TableFormatError, TableInfo
from lakegate_client.tables.directory import fs_path, new_data_file
from lakegate_client.tables.empty_overwrite import schema_part
from lakegate_client.tables.files import write_parquet_batches
from lakegate_client.tables.schema_fit import conform_batch

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
    """What one task hands to the driver: files (staged or written) or Lance fragment JSON."""

    partition: int
    files: tuple[WrittenFile, ...] = ()
    fragments: tuple[str, ...] = field(default=())
    uploads: tuple[PendingUpload, ...] = ()
    rows: int = 0
    records: tuple[str, ...] = ()  # Lance on S3: the attempt's ledger record


@dataclass(frozen=True)
class WritePlan:
    """Fixed on the driver before any task runs; identical in every task.

    ``staged``: tasks stage multipart uploads (S3); ``plain``: what a plain table looked like at
    planning, for the commit's conflict check (S3 plain tables only); ``seen``: the job's intent
    as planning wrote it (Delta, Lance on S3, ADLS, GCS: ``engine/job_intent.py``).
    """

    opts: SourceOptions
    info: TableInfo
    overwrite: bool
    write_id: str
    read_version: int | None
    staged: bool = False
    plain: object | None = None  # the format's planning result (plain: ``PlainPlan``)
    faults: Faults = field(default_factory=Faults)
    seen: Seen | None = None

    @property
    def job(self) -> bool:
        """Whether planning wrote the job's intent."""
        return self.seen is not None

    def job_of(self) -> Job:
        """The job as the commit protocol takes it (``engine/protocol.py``)."""
        return Job(fmt=self.info.format, write_id=self.write_id, overwrite=self.overwrite,
                   staged=self.staged, read_version=self.read_version, plain=self.plain,
                   seen=self.seen)


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
        """Stream the batches into one staged Parquet file or Lance fragments (never all in
        memory); then the worker's long-lived heap leaves PySpark's per-task collection
        (``worker_heap``)."""
        result = self._write(iterator)
        if self._plan.opts.freeze_worker_heap:
            worker_heap.settle()
        return result

    def _write(self, iterator: Iterator[pa.RecordBatch]) -> TaskResult:
        from pyspark import TaskContext

        context = TaskContext.get()
        partition = context.partitionId() if context is not None else 0
        attempt = context.attemptNumber() if context is not None else 0
        non_empty = (b for b in iterator if b.num_rows)
        first = next(non_empty, None)
        if first is None:  # nothing to write: no file, no gateway call
            return TaskResult(partition=partition)
        counter = _RowCounter()
        conformed = (self._conform(b) for b in itertools.chain([first], non_empty))
        batches = counter.count(self._plan.faults.midway(conformed, partition, attempt))
        creds = table_credentials(self._plan.opts, "write", self._plan.info.location)
        if self._plan.info.format == "lance":
            intent = jobs.job_of(creds, self._plan.write_id) if self._plan.job else None
            with jobs.job_lease(intent, seen=self._plan.seen):  # a long task keeps it alive
                return self._land_lance(creds, batches, partition, attempt, counter)
        rel = new_data_file(self._plan.write_id, partition, "parquet")
        if self._plan.staged:
            upload = self._stage(creds, rel, batches, partition, attempt)
            written = WrittenFile(rel, upload.size, counter.rows, _now_ms())
            return TaskResult(partition, files=(written,), uploads=(upload,), rows=counter.rows)
        fs, root = creds.pyarrow_filesystem(), fs_path(creds.location)
        size = write_parquet_batches(fs, f"{root}/{rel}", self._schema, batches)
        self._plan.faults.hit("after_land", partition, attempt)
        written = WrittenFile(path=rel, size=size, rows=counter.rows, modified_ms=_now_ms())
        return TaskResult(partition=partition, files=(written,), rows=counter.rows)

    def _land_lance(self, creds: TableCredentials, batches: Iterator[pa.RecordBatch],
                    partition: int, attempt: int, counter: _RowCounter) -> TaskResult:
        """Write the fragments, then record their files in the attempt ledger (S3, ADLS, GCS)
        before reporting them: an attempt the commit does not use is then found by its job's
        cleanup, or by the next one (``attempts.sweep_ended``)."""
        fragments = self._write_lance(creds, batches)
        records: tuple[str, ...] = ()
        try:
            self._plan.faults.hit("after_land", partition, attempt)
            ledger = lance_format.lance_ledger(creds)
            if ledger is not None:
                records = (attempts.check_in(*ledger, self._plan.write_id, partition, attempt,
                                             lance_format.lance_files(fragments)),)
        except BaseException:
            lance_format.drop_lance_fragments(creds, fragments)
            raise
        return TaskResult(partition=partition, fragments=fragments, rows=counter.rows,
                          records=records)

    def _conform(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        return conform_batch(batch, self._schema)  # the schema planning fitted

    def _stage(self, creds: TableCredentials, rel: str, batches: Iterator[pa.RecordBatch],
               partition: int, attempt: int) -> PendingUpload:
        """One Parquet file as a pending upload; a failure after staging aborts it."""
        s3, where = stores.table_store(creds), S3Location.parse(creds.location)
        upload = stage_parquet(s3, where.bucket, where.key(rel), self._schema, batches)
        try:
            self._plan.faults.hit("after_land", partition, attempt)
        except BaseException:
            abort_uploads(s3, where.bucket, [(upload.key, upload.upload_id)])
            raise
        return upload

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
            # overwriteSchema: fragments of the new schema, not checked against the old one
            mode="overwrite" if self._plan.overwrite and self._plan.opts.overwrite_schema
            else "append",
        )
        return tuple(json.dumps(f.to_json()) for f in fragments)

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        """Publish the reported attempts' data (``protocol_for(fmt).commit``); then the
        driver's worker keeps its long-lived heap out of the collection that follows
        (``worker_heap.settling``)."""
        with worker_heap.settling(self._plan.opts.freeze_worker_heap):
            self._commit(messages)

    def _commit(self, messages: list[WriterCommitMessage | None]) -> None:
        self._plan.faults.hit("before_commit", 0)
        creds = table_credentials(self._plan.opts, "write", self._plan.info.location)
        plan, timing, reported = self._plan, None, _reported(messages)
        if (plan.overwrite and not (reported.files or reported.uploads)
                and plan.info.format in DIRECTORY_FORMATS):  # the table keeps its schema
            rel, upload = schema_part(creds, plan.write_id, self._schema,
                                      stores.table_store(creds) if plan.staged else None)
            reported = dataclasses.replace(reported, files=[WrittenFile(rel, 0, 0, _now_ms())],
                                           uploads=[upload] if upload else [])
        if plan.plain is not None:
            lease = plan.faults.lease_s()
            timing = CommitTiming(on_step=lambda step: plan.faults.hit(step, 0))
            if lease is not None:  # test faults only
                timing = dataclasses.replace(timing, lease_s=lease)
        protocol_for(plan.info.format).commit(creds, plan.job_of(), self._schema, reported,
                                              timing)

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        with worker_heap.settling(self._plan.opts.freeze_worker_heap):
            self._abort(messages)

    def _abort(self, messages: list[WriterCommitMessage | None]) -> None:
        creds = table_credentials(self._plan.opts, "write", self._plan.info.location)
        protocol_for(self._plan.info.format).abort(creds, self._plan.job_of(),
                                                   _reported(messages))


def _reported(messages: list[WriterCommitMessage | None]) -> Reported:
    """What the attempts Spark accepted reported, as the commit protocol takes it."""
    results = [m for m in messages if isinstance(m, TaskResult)]
    return Reported(files=[f for r in results for f in r.files],
                    uploads=[u for r in results for u in r.uploads],
                    fragments=[f for r in results for f in r.fragments],
                    records=[x for r in results for x in r.records])


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
