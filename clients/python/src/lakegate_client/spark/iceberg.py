"""Iceberg tables in the ``lakekeeper`` data source (``.option("format", "iceberg")``).

Why this split: the catalog calls (load, create, the one commit) happen on the driver, through
pyiceberg's own REST client pointed at the gateway (``/catalog``), so Iceberg's commit rules
(requirements, conflicts, snapshots) are pyiceberg's, not re-implemented here. Tasks never talk to
the catalog: each reads or writes data files with an Iceberg-table credential from its OWN node's
gateway (``lakegate_client`` ``credentials(kind="iceberg")``), so no secret travels through
Spark. Reads: pyiceberg plans the scan on the driver; each task decodes its file scan task with
pyiceberg's ``ArrowScan`` (field ids, deletes, projection). Writes: each task writes Parquet files
under ``<location>/data/`` (staged uploads on S3); the driver adds them all in one commit
(``add_files``, after a delete of everything for an overwrite), retrying a commit that lost to a
concurrent one on the new snapshot. A failed job leaves no data file of its write behind. An
ambiguous answer to the commit (a 5xx, a timeout) is settled by reading the table for the write
id in its snapshots' summary; when nothing can settle it, the job fails and keeps its files.

The driver needs the gateway's HTTP address for pyiceberg (the ``catalog_url`` option,
``$LAKEGATE_CATALOG_URL``, or ``url``/``$LAKEGATE_URL`` when that is ``http://``): pyiceberg
speaks HTTP over TCP only.
"""

from __future__ import annotations

import logging
import os
import pickle
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pyspark.sql.datasource import (
    DataSourceArrowWriter,
    DataSourceReader,
    InputPartition,
    WriterCommitMessage,
)

from lakegate_client.engine import job_intent
from lakegate_client.engine.conditional_writes import process_probe
from lakegate_client.engine.job_files import delete_under
from lakegate_client.engine.jobs import (
    commit_unknown,
    end_job,
    fenced,
    finish_abandoned_jobs,
    job_of,
    job_store,
    left_to_recovery,
    recover_jobs,
    start_job,
)
from lakegate_client.engine.protocol import CommitUnknownError
from lakegate_client.engine.retrying import after_commit, with_retries
from lakegate_client.engine.staged import (
    abort_recorded,
    abort_uploads,
    complete_uploads,
    stage_parquet,
)
from lakegate_client.engine.stores.base import PendingUpload, S3Location
from lakegate_client.engine.stores.s3 import s3_client
from lakegate_client.spark import worker_heap
from lakegate_client.spark.connection import client_for
from lakegate_client.spark.faults import Faults
from lakegate_client.spark.iceberg_schema import fit_iceberg
from lakegate_client.spark.options import OptionsError
from lakegate_client.tables.catalog import TableFormatError
from lakegate_client.tables.directory import fs_path, list_files
from lakegate_client.tables.planning_refusal import undone_on_refusal
from lakegate_client.tables.schema_fit import check_schema_options, conform_batch

if TYPE_CHECKING:
    import pyarrow as pa
    from pyiceberg.io import FileIO
    from pyiceberg.table import Table
    from pyspark.sql.types import StructType

    from lakegate_client import TableCredentials
    from lakegate_client.spark.options import SourceOptions

ICEBERG_FORMAT = "iceberg"
COMMIT_RETRIES = 4  # Iceberg's commit.retry.num-retries default
WRITE_ID_PROPERTY = "lakegate.write-id"  # in the summary of the snapshots a write commits
log = logging.getLogger(__name__)


def catalog_uri(opts: SourceOptions) -> str:
    """The gateway's Iceberg REST base URL (``<http base>/catalog``) for the driver."""
    explicit = opts.catalog_url or os.environ.get("LAKEGATE_CATALOG_URL")
    base = explicit or opts.url or os.environ.get("LAKEGATE_URL") or ""
    if not base.startswith(("http://", "https://")):
        raise OptionsError(
            "Iceberg tables need the gateway's HTTP address on the driver (pyiceberg speaks "
            "HTTP over TCP): set the 'catalog_url' option or $LAKEGATE_CATALOG_URL, "
            "e.g. http://127.0.0.1:8765"
        )
    base = base.rstrip("/")
    return base if base.endswith("/catalog") else base + "/catalog"


def _catalog(opts: SourceOptions) -> Any:
    from pyiceberg.catalog.rest import RestCatalog

    from lakegate_client._auth import CallerAuth
    from lakegate_client._config import ClientConfig

    config = ClientConfig.resolve(opts.url, warehouse=opts.warehouse)
    if not config.warehouse:
        raise OptionsError("Iceberg tables need a warehouse: the 'warehouse' option or "
                           "$LAKEGATE_WAREHOUSE")
    headers = {f"header.{k}": v for k, v in CallerAuth(config).headers().items()}
    return RestCatalog(
        "lakegate", uri=catalog_uri(opts), warehouse=config.warehouse,
        **{"header.X-Iceberg-Access-Delegation": "vended-credentials", **headers},
    )


def load_table(opts: SourceOptions) -> Table:
    """The table through the gateway (driver only)."""
    table: Table = _catalog(opts).load_table((*opts.namespace, opts.table))
    return table


def ensure_table(opts: SourceOptions, schema: pa.Schema,
                 on_create: Callable[[Table], object] | None = None) -> Table:
    """Load the table, or create it from ``schema`` when the ``create`` option allows it (a job
    that loses the create race to another uses the winner's table); ``on_create`` is told of a
    table this call created."""
    from pyiceberg.exceptions import NoSuchTableError, TableAlreadyExistsError

    catalog = _catalog(opts)
    ident = (*opts.namespace, opts.table)
    table: Table
    try:
        table = catalog.load_table(ident)
    except NoSuchTableError:
        if not opts.create:
            raise
        try:
            table = catalog.create_table(ident, schema=schema)
        except TableAlreadyExistsError:
            return catalog.load_table(ident)  # type: ignore[no-any-return]
        if on_create is not None:
            on_create(table)
    return table


def node_credentials(opts: SourceOptions, access: str,
                     expected_location: str | None = None) -> TableCredentials:
    """This node's Iceberg-table credential (memoized by the process's client), for the table
    at ``expected_location`` (the driver's) when given."""
    return client_for(opts.url).credentials(
        list(opts.namespace), opts.table, warehouse=opts.warehouse,
        access="write" if access == "write" else "read", kind="iceberg",
        expected_location=expected_location,
    )


def _file_io(creds: TableCredentials) -> FileIO:
    from pyiceberg.io.pyarrow import PyArrowFileIO

    return PyArrowFileIO(properties=dict(creds.config))


def spark_schema_of(table: Table) -> StructType:
    from pyiceberg.io.pyarrow import schema_to_pyarrow
    from pyspark.sql.pandas.types import from_arrow_schema

    return from_arrow_schema(schema_to_pyarrow(table.schema(), include_field_ids=False))


# ---------------------------------------------------------------------------------- reads
@dataclass(frozen=True)
class IcebergPartition(InputPartition):
    """One pyiceberg FileScanTask (pickled: data file, deletes, residual; never a secret)."""

    index: int
    task: bytes


class IcebergReader(DataSourceReader):
    """Driver: pyiceberg plans the scan. Executor: node credential + pyiceberg ArrowScan."""

    def __init__(self, opts: SourceOptions, table: Table, schema: StructType) -> None:
        self._opts = opts
        self._schema = schema
        self._metadata_json = table.metadata.model_dump_json()
        self._location = table.location()
        self._tasks = [pickle.dumps(t) for t in table.scan().plan_files()]

    def partitions(self) -> Sequence[InputPartition]:
        return [IcebergPartition(index=i, task=t) for i, t in enumerate(self._tasks)]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        from pyiceberg.expressions import AlwaysTrue
        from pyiceberg.io.pyarrow import ArrowScan
        from pyiceberg.table.metadata import TableMetadataUtil
        from pyspark.sql.pandas.types import to_arrow_schema

        if not isinstance(partition, IcebergPartition):
            raise TableFormatError(f"unexpected partition {type(partition).__name__}")
        target = to_arrow_schema(self._schema)
        metadata = TableMetadataUtil.parse_raw(self._metadata_json)
        io = _file_io(node_credentials(self._opts, "read", self._location))
        projected = metadata.schema().select(*target.names)
        scan = ArrowScan(metadata, io, projected, AlwaysTrue())
        for batch in scan.to_record_batches([pickle.loads(partition.task)]):  # noqa: S301
            yield batch.select(target.names).cast(target)


# ---------------------------------------------------------------------------------- writes
@dataclass(frozen=True)
class IcebergFiles(WriterCommitMessage):
    """The data files one task wrote (full URIs), and their pending uploads on S3."""

    paths: tuple[str, ...]
    uploads: tuple[PendingUpload, ...] = ()


class IcebergWriter(DataSourceArrowWriter):
    """Tasks stage Parquet under ``<location>/data/``; the driver publishes and commits them once.

    On S3 a task's file is a pending multipart upload (``engine/staged.py``) that only the commit
    completes, so failed, duplicate and late attempts leave no object; elsewhere files are
    written directly and the job deletes its unpublished ones (named by its write id).
    """

    def __init__(self, opts: SourceOptions, table: Table, arrow_schema: pa.Schema,
                 overwrite: bool, write_id: str | None = None, job: bool = False) -> None:
        self._opts = opts
        self._location = table.location().rstrip("/")
        self._schema = arrow_schema
        self._overwrite = overwrite
        self._write_id = write_id or uuid.uuid4().hex
        self._faults = Faults.parse(opts.test_fault)
        self._job = job  # planning wrote the job's intent (``engine/job_intent.py``)

    def write(self, iterator: Iterator[pa.RecordBatch]) -> IcebergFiles:
        """One data file per task (staged on S3); then the worker's long-lived heap leaves
        PySpark's per-task collection (``worker_heap``)."""
        files = self._write(iterator)
        if self._opts.freeze_worker_heap:
            worker_heap.settle()
        return files

    def _write(self, iterator: Iterator[pa.RecordBatch]) -> IcebergFiles:
        import pyarrow as pa
        import pyarrow.parquet as pq
        from pyspark import TaskContext

        context = TaskContext.get()
        partition = context.partitionId() if context is not None else 0
        attempt = context.attemptNumber() if context is not None else 0
        batches = [conform_batch(b, self._schema) for b in iterator if b.num_rows]
        if not batches:
            return IcebergFiles(paths=())
        creds = node_credentials(self._opts, "write", self._location)
        path = f"{self._location}/data/{self._write_id}-{uuid.uuid4().hex}.parquet"
        staged = self._faults.midway(iter(batches), partition, attempt)
        if creds.storage == "s3":
            s3, where = s3_client(creds), S3Location.parse(path)
            upload = stage_parquet(s3, where.bucket, where.prefix, self._schema, staged)
            try:
                self._faults.hit("after_land", partition, attempt)
            except BaseException:
                abort_uploads(s3, where.bucket, [(upload.key, upload.upload_id)])
                raise
            return IcebergFiles(paths=(path,), uploads=(upload,))
        table = pa.Table.from_batches(list(staged), schema=self._schema)
        pq.write_table(table, fs_path(path), filesystem=creds.pyarrow_filesystem())
        self._faults.hit("after_land", partition, attempt)
        return IcebergFiles(paths=(path,))

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        """One snapshot of the reported files; then the driver's worker keeps its long-lived
        heap out of the collection that follows (``worker_heap.settling``)."""
        with worker_heap.settling(self._opts.freeze_worker_heap):
            self._commit(messages)

    def _commit(self, messages: list[WriterCommitMessage | None]) -> None:
        self._faults.hit("before_commit", 0)
        paths = [p for m in messages if isinstance(m, IcebergFiles) for p in m.paths]
        uploads = [u for m in messages if isinstance(m, IcebergFiles) for u in m.uploads]
        creds = node_credentials(self._opts, "write", self._location)
        intent = job_of(creds, self._write_id) if self._job else None
        with fenced(intent, uploads=[[u.key, u.upload_id] for u in uploads], files=paths):
            if uploads:
                complete_uploads(s3_client(creds), S3Location.parse(self._location).bucket,
                                 uploads)
            try:
                self._commit_resolved(paths, intent)
            except CommitUnknownError:  # the catalog may reference the files: keep every one
                commit_unknown(intent, f"write {self._write_id}")  # and the intent, marked so
                raise
            except BaseException:
                self._drop_files(creds, keep=())
                end_job(intent)
                raise
        if not uploads:  # staged: the completed uploads are the job's only visible files
            after_commit("removing unused files", self._write_id,
                         lambda: self._drop_files(creds, keep=paths))
        end_job(intent)

    def _commit_resolved(self, paths: list[str],
                         intent: job_intent.JobIntent | None = None) -> None:
        """Commit once; a conflict is redone on the new snapshot, an ambiguous answer resolved.

        An ambiguous answer (pyiceberg's ``CommitStateUnknownException`` on 500/502/504, another
        5xx, a timeout or a broken connection) may hide a commit that landed: the table is read
        again and the write id in the snapshot summary decides. Not found, the commit is redone:
        every attempt requires the snapshot it read, so of an earlier attempt still in flight
        and a later one at most one lands. Undecided at the end: :class:`CommitUnknownError`.
        """
        from pyiceberg.exceptions import CommitFailedException

        unknown: BaseException | None = None
        for attempt in range(COMMIT_RETRIES + 1):
            if attempt and intent is not None:  # each commit call starts on a fresh lease
                intent.fence()
            try:
                self._commit_once(paths)
                return
            except CommitFailedException:  # a concurrent commit won (an earlier one of ours?)
                if unknown is not None and self.committed() is True:
                    return
                if attempt == COMMIT_RETRIES and unknown is None:
                    raise
            except Exception as exc:
                if not _ambiguous(exc):
                    if unknown is not None and self.committed() is True:
                        return
                    if unknown is None:
                        raise
                    raise CommitUnknownError(self._unknown_message()) from exc
                unknown = exc
                if self.committed() is True:
                    log.warning("the Iceberg commit of write %s answered %r but landed",
                                self._write_id, exc)
                    return
            time.sleep(min(0.1 * 2**attempt, 2.0))
        raise CommitUnknownError(self._unknown_message()) from unknown

    def _unknown_message(self) -> str:
        return (f"the Iceberg commit of write {self._write_id} to {self._location} got no clear "
                f"answer and the table could not show whether it landed: its data files are "
                f"KEPT (not deleted); look for snapshot summary {WRITE_ID_PROPERTY}="
                f"{self._write_id} before retrying the job")

    def committed(self) -> bool | None:
        """Whether a snapshot of this write is in the table (None: the table cannot be read)."""
        return iceberg_committed(self._opts, self._write_id)

    def _commit_once(self, paths: list[str]) -> None:
        from pyiceberg.expressions import AlwaysTrue

        table = load_table(self._opts)
        mark = {WRITE_ID_PROPERTY: self._write_id}
        with table.transaction() as tx:
            if self._overwrite and _has_rows(table):  # pyiceberg warns on a delete of nothing
                tx.delete(AlwaysTrue(), snapshot_properties=mark)
            if paths:
                tx.add_files(paths, snapshot_properties=mark)

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        """Abort the uploads and delete the job's files, unless a snapshot may reference them
        (the commit landed, or the table cannot be read: then they are kept, logged)."""
        with worker_heap.settling(self._opts.freeze_worker_heap):
            self._abort(messages)

    def _abort(self, messages: list[WriterCommitMessage | None]) -> None:
        uploads = [u for m in messages if isinstance(m, IcebergFiles) for u in m.uploads]
        creds = node_credentials(self._opts, "write", self._location)
        if uploads:
            bucket = S3Location.parse(self._location).bucket
            abort_uploads(s3_client(creds), bucket, [(u.key, u.upload_id) for u in uploads])
        intent = job_of(creds, self._write_id) if self._job else None
        if left_to_recovery(intent, f"write {self._write_id}"):  # ambiguous means keep
            return
        state = self.committed()
        if state is not False:
            log.error("abort of write %s keeps its data files: the table %s (snapshot "
                      "summary %s=%s)", self._write_id,
                      "references them" if state else "could not be read", WRITE_ID_PROPERTY,
                      self._write_id)
            if state:
                end_job(intent)
            return
        with_retries(lambda: self._drop_files(creds, keep=()))
        end_job(intent)

    def _drop_files(self, creds: TableCredentials, keep: Sequence[str]) -> None:
        """Delete this job's data files that no snapshot references (not in ``keep``)."""
        drop_iceberg_files(creds, self._location, self._write_id, keep)


def iceberg_committed(opts: SourceOptions, write_id: str) -> bool | None:
    """Whether a snapshot of ``write_id`` is in the table (None: the table cannot be read)."""
    try:
        table = with_retries(lambda: load_table(opts))
    except Exception:  # the catalog cannot answer: undecided
        log.warning("could not read the Iceberg table of write %s", write_id, exc_info=True)
        return None
    return any(s.summary is not None and s.summary.get(WRITE_ID_PROPERTY) == write_id
               for s in table.metadata.snapshots)


def drop_iceberg_files(creds: TableCredentials, location: str, write_id: str,
                       keep: Sequence[str] = ()) -> None:
    """Delete the write's data files under ``<location>/data`` that are not in ``keep``."""
    fs, data = creds.pyarrow_filesystem(), fs_path(f"{location}/data")
    kept = {fs_path(p) for p in keep}
    mine = [rel for rel in list_files(fs, data)
            if rel.startswith(write_id) and f"{data}/{rel}" not in kept]
    delete_under(creds, f"{location}/data", mine)


class IcebergJobs:
    """Recovery of an Iceberg job (``job_intent.Resolver``): a snapshot summary names its write
    id, or its data files (and recorded uploads) are removed."""

    def __init__(self, opts: SourceOptions, creds: TableCredentials, location: str) -> None:
        self._opts, self._creds, self._location = opts, creds, location.rstrip("/")

    def landed(self, intent: dict[str, Any]) -> bool:
        return not intent.get("staged")

    def committed(self, intent: dict[str, Any]) -> bool | None:
        return iceberg_committed(self._opts, str(intent["write_id"]))

    def discard(self, intent: dict[str, Any]) -> None:
        abort_recorded(self._creds, intent)
        drop_iceberg_files(self._creds, self._location, str(intent["write_id"]))

    def settle(self, intent: dict[str, Any]) -> None:
        """The removal of unused files ``IcebergWriter.commit`` makes after its commit (a job
        that wrote visible files: its data files the snapshot, ``files``, does not hold)."""
        if not intent.get("staged"):
            drop_iceberg_files(self._creds, self._location, str(intent["write_id"]),
                               keep=[str(f) for f in intent.get("files", ())])


def recover_iceberg_jobs(opts: SourceOptions, location: str, *, reading: bool,
                         timing: job_intent.JobTiming | None = None) -> int:
    """Remove the files of Iceberg jobs whose driver died (their lease expired): a writer's
    planning (write credential), or a reader's (it finds them with its read credential and only
    then asks for a write one; ``engine/jobs.py``). Best effort: logged, the read or write goes
    on."""
    def resolver(creds: TableCredentials) -> IcebergJobs:
        return IcebergJobs(opts, creds, location)

    try:
        creds = node_credentials(opts, "read" if reading else "write", location)
    except Exception:  # the read or write goes on with the table as it is
        log.warning("could not remove the files of an abandoned write of %s", location,
                    exc_info=True)
        return 0
    if reading:
        return finish_abandoned_jobs(resolver, creds,
                                     lambda: node_credentials(opts, "write", location), timing)
    return recover_jobs(resolver, creds, timing)


def _ambiguous(exc: BaseException) -> bool:
    """Whether a failed commit call may still have landed: a 5xx (pyiceberg's
    ``CommitStateUnknownException`` for 500/502/504), a timeout or a connection error
    (``requests`` errors are ``OSError``s). A 4xx or a client-side error is a clear no."""
    from pyiceberg.exceptions import (
        CommitStateUnknownException,
        ServerError,
        ServiceUnavailableError,
    )

    return isinstance(exc, (CommitStateUnknownException, ServerError, ServiceUnavailableError,
                            OSError))


def _has_rows(table: Table) -> bool:
    """Whether the table's current snapshot holds any row (none: no snapshot, or 0 records)."""
    snapshot = table.current_snapshot()
    if snapshot is None or snapshot.summary is None:
        return snapshot is not None
    return snapshot.summary.get("total-records", "1") != "0"


def iceberg_writer(opts: SourceOptions, spark_arrow: pa.Schema, overwrite: bool) -> IcebergWriter:
    """The writer for a (possibly new) Iceberg table; files follow the table's own schema."""
    from pyiceberg.io.pyarrow import schema_to_pyarrow

    check_schema_options(ICEBERG_FORMAT, overwrite=overwrite, merge_schema=opts.merge_schema,
                         overwrite_schema=opts.overwrite_schema)  # before creating
    created: list[Table] = []
    table = ensure_table(opts, spark_arrow, created.append)
    with undone_on_refusal(created, lambda t: _catalog(opts).drop_table(t.name())):
        table = fit_iceberg(table, spark_arrow, opts, overwrite)  # a refusal: not created
        location, write_id = table.location().rstrip("/"), uuid.uuid4().hex
        recover_iceberg_jobs(opts, location, reading=False)
        creds = node_credentials(opts, "write", location)
        store = job_store(creds)
        if store is not None:  # a recoverer's takeover of the intent and the fence losing to it
            process_probe().ensure(store[0], store[1].bucket, store[1].prefix,
                                   accept_risk=opts.accept_single_writer_risk)
    target = schema_to_pyarrow(table.schema(), include_field_ids=False)
    job = start_job(creds, ICEBERG_FORMAT, write_id, staged=creds.storage == "s3") is not None
    return IcebergWriter(opts, table, target, overwrite, write_id=write_id, job=job)
