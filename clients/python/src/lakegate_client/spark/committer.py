"""The driver's half of a Spark write: publish what the reported task attempts wrote, or nothing.

Why a module of its own: tasks (``writer.py``) only ever *stage* data; every decision about what
becomes visible is made here, once, by the one process that knows which attempts Spark accepted.

- Plain tables and Delta on S3 and ADLS: tasks leave staged files pending (``tables/staged.py``;
  S3 multipart uploads, ADLS uncommitted blocks, through ``table_store``).
  Commit completes the reported ones (plain: under the conflict protocol of
  ``tables/plain_commit.py``; Delta: then one Delta transaction adds them); abort aborts them.
  Both then sweep the job's other pending uploads when the credential may list them.
- Other storage (no store here yet): tasks write visible files named by the write id; commit
  and abort delete every file of the job that is not published.
- Lance: one commit of the reported fragments; append never overwrites (see ``commit_lance``).
  On S3 and ADLS the job's attempt ledger (``tables/attempts.py``) removes the fragment files of
  attempts the commit does not use (killed duplicates, tasks finishing after the job ended).
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, wait
from contextlib import contextmanager
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING, Any, Literal, TypeVar

from lakegate_client._errors import UnsupportedStorageError
from lakegate_client.spark.helper_pool import helpers
from lakegate_client.tables import attempts, job_intent
from lakegate_client.tables.directory import delete_files, fs_path, list_files, write_id_of
from lakegate_client.tables.job_intent import JobIntent, JobTiming, LeaseKeeper, Seen
from lakegate_client.tables.lance_manifests import newest_version
from lakegate_client.tables.object_store import ObjectStore, S3Store, StagingListDenied
from lakegate_client.tables.plain_commit import (
    CommitTiming,
    PlainPlan,
    abort_plain,
    commit_plain,
)
from lakegate_client.tables.plain_commit import finish_abandoned as finish_abandoned_commits
from lakegate_client.tables.staged import (
    PendingUpload,
    S3Location,
    abort_uploads,
    complete_uploads,
    sweep_uploads,
)

if TYPE_CHECKING:
    import pyarrow as pa

    from lakegate_client import TableCredentials

RETRIES = 3  # attempts of an idempotent step (a read, a listing, a delete) before giving up
LANCE_CREATE_WAIT_S = 180.0  # longer than a dead job's create claim lives (STALE_CREATE_S)
WRITE_ID_PROPERTY = "lakegate.write-id"  # in the transaction (Lance) a write commits
LANCE_CONFLICT_RETRIES = 4  # an append redone after a concurrent overwrite
log = logging.getLogger(__name__)
T = TypeVar("T")


def s3_client(creds: TableCredentials) -> Any:
    """A boto3 S3 client on the credential, made once per process and credential.

    Why cached: building a boto3 client loads botocore's service model, 0.3-0.5 s of CPU on a
    busy 2-core node, once per task and several times per commit (issue 36). A client is
    thread-safe and bound to exactly these keys, so a refreshed credential gets its own client
    and an old one is only ever reused with the keys it was vended with.
    """
    kwargs = creds.boto3_kwargs()
    config = kwargs.pop("config", None)
    path_style = (getattr(config, "s3", None) or {}).get("addressing_style") == "path"
    return _client(tuple(sorted((k, str(v)) for k, v in kwargs.items() if v is not None)),
                   path_style, os.getpid())


@lru_cache(maxsize=16)
def _client(kwargs: tuple[tuple[str, str], ...], path_style: bool, pid: int) -> Any:
    """``pid``: a forked child builds its own (a client's connections are not fork-safe)."""
    from botocore.config import Config

    config = Config(s3={"addressing_style": "path"} if path_style else {"addressing_style": "auto"})
    options: dict[str, Any] = {**dict(kwargs), "config": config}
    session = _session(pid)
    with session.lock:  # a boto3 session is not thread-safe; its clients are
        return session.boto3.client("s3", **options)


@dataclass(frozen=True)
class _Session:
    boto3: Any
    lock: threading.Lock


@lru_cache(maxsize=1)
def _session(pid: int) -> _Session:
    """The process's one boto3 session, whose loader every client shares.

    Why one: a client built on a session of its own loads and keeps its own copy of the S3
    service model (0.2 s of CPU and some 35,000 objects). Every table's credential is a client
    of its own, so a long-lived Spark worker collected a model per table, and PySpark runs a
    full ``gc.collect()`` after every task: at 200 partitions that collection, not the write,
    was most of a task's time (issue 36). Clients of one session share the model.
    """
    import boto3

    return _Session(boto3.session.Session(), threading.Lock())


STAGED_STORAGE = frozenset({"s3", "adls", "gcs"})  # stores with an ObjectStore (``table_store``)


def stages(creds: TableCredentials) -> bool:
    """Whether tasks stage files invisibly on this credential's store, and the plain-table
    commit protocol runs there (S3: multipart uploads; ADLS: uncommitted blocks; GCS: hidden
    part objects composed at commit)."""
    return creds.storage in STAGED_STORAGE


def table_store(creds: TableCredentials) -> ObjectStore:
    """The store of a credential's table, as the write protocols use it: S3 over this
    process's cached boto3 client, ADLS over the Blob REST API with the vended SAS, GCS over the
    JSON API with the vended OAuth token.

    Raises:
        UnsupportedStorageError: the storage has no :class:`ObjectStore` (see ``stages``).
    """
    where = S3Location.parse(creds.location)
    if creds.storage == "s3":
        return S3Store(s3_client(creds), where.bucket)
    if creds.storage == "adls":
        from lakegate_client.tables.azure_store import AzureBlobStore

        return AzureBlobStore.for_credentials(creds)
    if creds.storage == "gcs":
        from lakegate_client.tables.gcs_store import GcsStore

        return GcsStore.for_credentials(creds)
    raise UnsupportedStorageError(f"the write protocol does not run on {creds.storage} storage")


def sweep(s3: Any, where: S3Location, write_id: str, keep: Sequence[str] = ()) -> int:
    """Abort the job's pending uploads left by failed, duplicate or late attempts.

    Lakekeeper's session policy grants no ``s3:ListBucketMultipartUploads``, so under a vended
    credential this listing is refused (AccessDenied): then nothing is swept here, and those
    invisible uploads wait for the bucket's ``AbortIncompleteMultipartUpload`` lifecycle rule.
    A read-write ADLS SAS may list staged blobs, so there the sweep runs. Returns how many
    uploads were aborted (-1: listing refused).
    """
    try:
        return sweep_uploads(s3, where, write_id, keep)
    except StagingListDenied:
        return -1


def retried(step: Callable[[], T], attempts: int = RETRIES) -> T:
    """``step()``, run again after a short pause when it raises (``attempts`` in all).

    Why: after a commit's point of no return, and when deciding whether a commit landed, one
    throttled or dropped call must not leave debris nor make the outcome look unknown. Only
    idempotent steps (reads, deletes, listings) are retried.
    """
    for attempt in range(attempts - 1):
        try:
            return step()
        except Exception:  # tried again below; the last attempt raises
            log.debug("retrying after a failed step", exc_info=True)
            time.sleep(min(0.2 * 2**attempt, 2.0))
    return step()


def after_commit(what: str, write_id: str, cleanup: Callable[[], object]) -> bool:
    """Run a cleanup that follows a durable commit, never raising; returns whether it ran.

    Spark calls ``abort`` when ``commit`` raises, and ``abort`` deletes the job's files: an
    error in the cleanup after the table already references them must not turn into that.
    What is left behind is debris (unreferenced files, pending uploads), logged, once the
    cleanup failed :data:`RETRIES` times.
    """
    try:
        retried(cleanup)
    except Exception:  # debris only: logged, never raised
        log.warning("after the commit of write %s, %s failed", write_id, what, exc_info=True)
        return False
    return True


def discard_staged(s3: Any, where: S3Location, uploads: Sequence[PendingUpload],
                   write_id: str) -> None:
    """Abort reported uploads, then sweep the job's others (abort and failed commits)."""
    abort_uploads(s3, where.bucket, [(u.key, u.upload_id) for u in uploads])
    sweep(s3, where, write_id)


def publish_plain(creds: TableCredentials, fmt: str, plan: PlainPlan,
                  uploads: Sequence[PendingUpload], *, overwrite: bool, write_id: str,
                  timing: CommitTiming | None = None) -> None:
    """Complete a plain job's uploads under the commit protocol (``tables/plain_commit.py``).

    ``commit_plain`` raises only before the point of no return; then the uploads are aborted
    (unless another process took the commit over to finish it). The sweep never aborts an
    upload of the plan: a step left to recovery may still need it.
    """
    s3, where = table_store(creds), S3Location.parse(creds.location)
    try:
        commit_plain(s3, where, fmt, plan, uploads, overwrite=overwrite, write_id=write_id,
                     timing=timing)
    except BaseException:
        abort_plain_job(s3, where, uploads, write_id)
        raise
    keep = [u.upload_id for u in uploads]
    after_commit("the upload sweep", write_id, lambda: sweep(s3, where, write_id, keep))


def abort_plain_job(s3: Any, where: S3Location, uploads: Sequence[PendingUpload],
                    write_id: str) -> None:
    """A plain job's abort: never deletes an object, only aborts what its commit did not take
    past the point of no return (``abort_plain``), then sweeps its other pending uploads."""
    if abort_plain(s3, where, uploads, write_id):
        sweep(s3, where, write_id)


def finish_abandoned(creds: TableCredentials,
                     write_creds: Callable[[], TableCredentials]) -> int:
    """A reader planning a plain table on S3 first finishes commits whose driver died
    (``recover_plain``), so a crashed job never leaves it torn once someone reads it.

    Best effort (logged): listing the intents needs only the read credential; a recovery needs
    a write one, which a read-only caller may not get. Returns how many commits it finished.
    """
    if not stages(creds):
        return 0
    try:
        return finish_abandoned_commits(table_store(creds), S3Location.parse(creds.location),
                                        lambda: table_store(write_creds()))
    except Exception:  # the read goes on with the table as it is
        log.warning("could not finish an abandoned commit of %s", creds.location, exc_info=True)
        return 0


def publish_delta(creds: TableCredentials, schema: pa.Schema, files: Sequence[Any],
                  uploads: Sequence[PendingUpload], *, overwrite: bool, write_id: str,
                  intent: JobIntent | None = None, seen: Seen | None = None) -> None:
    """Complete the staged files, then add them (``files``: ``WrittenFile``) in one Delta commit.

    ``intent`` (S3, ADLS: the job's, written at planning, as ``seen`` then) is fenced first: a
    job taken over after its lease expired commits nothing
    (:class:`~lakegate_client.tables.job_intent.JobFencedError`).
    Completed-but-uncommitted files are unreferenced (no Delta reader sees them); a failed
    transaction deletes them. A failed commit call may still have landed (a lost answer, a
    timeout): the log then decides (:func:`delta_committed`), and when it cannot be read the
    files (and the intent, for a later recovery) are kept and the job fails with
    :class:`CommitUnknownError`.
    """
    s3 = table_store(creds) if uploads else None
    where = S3Location.parse(creds.location)
    with fenced(intent, seen, uploads=[[u.key, u.upload_id] for u in uploads],
                files=[f.path for f in files]):
        if s3 is not None:
            complete_uploads(s3, where.bucket, uploads)
        try:
            _delta_transaction(creds, schema, files, overwrite=overwrite, write_id=write_id)
        except BaseException as exc:
            state = delta_committed(creds, write_id)
            if state is None:
                raise CommitUnknownError(
                    f"the Delta commit of write {write_id} at {creds.location} failed ({exc!r}) "
                    f"and the log could not show whether it landed: its files are KEPT; look for "
                    f"the transaction {delta_app_id(write_id)!r} in the log before retrying the "
                    f"job") from exc
            if not state:
                drop_job_files(creds, write_id, keep=())
                end_job(intent)
                raise
            log.warning("the Delta commit of write %s failed (%r) but landed", write_id, exc)
    if s3 is None:  # tasks wrote visible files: those of failed or duplicate attempts go
        after_commit("removing unused files", write_id,
                     lambda: drop_job_files(creds, write_id, keep=[f.path for f in files]))
    end_job(intent)
    if s3 is not None:  # staged: the completed uploads are the job's only visible files
        after_commit("the upload sweep", write_id, lambda: sweep(s3, where, write_id))


def job_store(creds: TableCredentials) -> tuple[ObjectStore, S3Location] | None:
    """Where a Delta, Iceberg or Lance job keeps its intent (``tables/job_intent.py``): the
    table's store (S3, ADLS, GCS: ``table_store``) and location, or None elsewhere (no
    conditional PUT there: a crashed job's files are left to the format's own cleanup)."""
    return (table_store(creds), S3Location.parse(creds.location)) if stages(creds) else None


def job_of(creds: TableCredentials, write_id: str,
           timing: JobTiming | None = None) -> JobIntent | None:
    """The job's intent as this process sees it (None: no store with conditional writes)."""
    store = job_store(creds)
    if store is None or not write_id:
        return None
    return JobIntent(store[0], store[1], write_id, timing or JobTiming())


def start_job(creds: TableCredentials, fmt: str, write_id: str, *, staged: bool,
              timing: JobTiming | None = None) -> Seen | None:
    """Planning, before any task writes: write the job's intent and renew its lease from this
    process while it lives (tasks and the commit renew it too). Returns the intent as written
    (for the fence, :func:`fenced`), or None when there is none (no conditional writes).

    ``staged``: tasks leave invisible uploads (Delta on S3 and ADLS, Iceberg on S3), so nothing
    can be left behind before the commit fences the intent.
    """
    intent = job_of(creds, write_id, timing)
    if intent is None:
        return None
    seen = intent.create(fmt, staged=staged)
    _KEEPER.keep(intent)  # until the job fences or ends, a takeover, or the process ends
    return seen


@contextmanager
def fenced(intent: JobIntent | None, seen: Seen | None = None,
           **record: Any) -> Iterator[None]:
    """Fence the job's intent before its commit call (the point of no return) and renew its
    lease while the commit runs; ``seen``: the intent as planning wrote it (one PUT, no read,
    while unchanged since); ``record``: what a recoverer needs to remove the job's files."""
    if intent is None:
        yield
        return
    intent.fence(seen, **record)
    with _KEEPER.hold(intent, committing=True):
        yield


def end_job(intent: JobIntent | None, settled: bool = False) -> None:
    """The job ended (committed, or its files deleted): remove its intent (never raises;
    ``settled``: its own cleanup is complete, ``JobIntent.remove``)."""
    if intent is not None:
        intent.remove(settled=settled)


# Process-wide like the boto3 clients above: a Spark task is one call into a reused worker,
# and only module state outlives it.
_ALIVE = job_intent.AliveJobs()
_KEEPER = LeaseKeeper()


@contextmanager
def job_lease(intent: JobIntent | None, alive: job_intent.AliveJobs = _ALIVE,
              keeper: LeaseKeeper = _KEEPER, seen: Seen | None = None) -> Iterator[None]:
    """A task's part in the job's lease: renew it while the task writes, the first time at
    once unless this process did moments ago (``alive``: an earlier task of this worker) or
    planning wrote the intent moments ago (``seen``, as fresh as a renewal would leave it),
    all from the keeper's thread.

    Why the task never waits to learn whether its job is alive: it read the intent before
    writing, 4-8 ms of a 40 ms task on the first task of each worker (issue 36), to spare the
    files of a job taken over meanwhile (its lease expired; a recoverer removes its files).
    Those are safe without it: such a job commits nothing (its fence fails), and an attempt
    that records its files after the recoverer's cleanup is swept by the next cleanup on the
    dataset (``attempts.sweep_ended``), like any late attempt.
    """
    if intent is None:
        yield
        return
    at_once = not alive.confirmed(intent) and not _fresh(intent, seen)
    if at_once:
        alive.note(intent)
    with keeper.hold(intent, at_once=at_once):
        yield


def _fresh(intent: JobIntent, seen: Seen | None) -> bool:
    """Whether the intent planning wrote is younger than a renewal's own freshness bound
    (``JobIntent.renew_once`` would only read it): the keeper's first renewal, a quarter lease
    on, still comes well within the lease."""
    if seen is None:
        return False
    try:
        at = float(json.loads(seen.body).get("at", 0))
    except (ValueError, AttributeError):
        return False
    return 0 <= intent.timing.now() - at < intent.timing.lease_s / 8


class DeltaJobs:
    """Recovery of a Delta job (``job_intent.Resolver``): the log holds its transaction, or its
    ``part-<write id>-*`` files (and recorded uploads) are removed."""

    def __init__(self, creds: TableCredentials) -> None:
        self._creds = creds

    def landed(self, intent: dict[str, Any]) -> bool:
        return not intent.get("staged")

    def committed(self, intent: dict[str, Any]) -> bool | None:
        return delta_committed(self._creds, str(intent["write_id"]))

    def discard(self, intent: dict[str, Any]) -> None:
        write_id = str(intent["write_id"])
        abort_recorded(self._creds, intent)
        drop_job_files(self._creds, write_id, keep=())

    def settle(self, intent: dict[str, Any]) -> None:
        """The upload sweep ``publish_delta`` makes after its commit (staged jobs)."""
        if intent.get("staged") and stages(self._creds):
            sweep(table_store(self._creds), S3Location.parse(self._creds.location),
                  str(intent["write_id"]))


def abort_recorded(creds: TableCredentials, intent: dict[str, Any]) -> None:
    """Abort the uploads a fenced intent recorded (completed ones are files, deleted apart;
    abandoning never touches them)."""
    uploads = [(str(k), str(u)) for k, u in intent.get("uploads", ())]
    if uploads and stages(creds):
        abort_uploads(table_store(creds), S3Location.parse(creds.location).bucket, uploads)


class LanceJobs:
    """Recovery of a Lance job: a version carries its write id, or the files its attempts
    recorded in the ledger (and the fragments its commit recorded) are removed."""

    def __init__(self, creds: TableCredentials) -> None:
        self._creds = creds

    def landed(self, intent: dict[str, Any]) -> bool:
        ledger = lance_ledger(self._creds)
        return ledger is None or attempts.has_records(*ledger, str(intent["write_id"]))

    def committed(self, intent: dict[str, Any]) -> bool | None:
        since = intent.get("read_version")
        return lance_committed(self._creds.location, self._creds.lance_storage_options(),
                               str(intent["write_id"]),
                               since=int(since) if since is not None else None)

    def discard(self, intent: dict[str, Any]) -> None:
        write_id = str(intent["write_id"])
        ledger = lance_ledger(self._creds)
        delete_under(self._creds, self._creds.location, [str(f) for f in intent.get("files", ())])
        if ledger is not None:
            attempts.discard_unused(*ledger, write_id, ())

    def settle(self, intent: dict[str, Any]) -> None:
        """The ledger cleanup ``commit_lance`` makes alongside its commit: every file the
        job's attempts recorded but its commit (the fence's ``files``) does not use."""
        ledger = lance_ledger(self._creds)
        if ledger is not None:
            attempts.discard_unused(*ledger, str(intent["write_id"]),
                                    [str(f) for f in intent.get("files", ())])


def resolver_for(fmt: str, creds: TableCredentials) -> job_intent.Resolver:
    """The recovery of a Delta or Lance job on this table."""
    return LanceJobs(creds) if fmt == "lance" else DeltaJobs(creds)


def recover_jobs(fmt: str, creds: TableCredentials, timing: JobTiming | None = None) -> int:
    """A writer's planning: finish every Delta or Lance job whose driver died (write credential);
    returns how many. Best effort: a failure is logged and the write goes on."""
    store = job_store(creds)
    if store is None:
        return 0
    try:
        return job_intent.recover_jobs(*store, resolver_for(fmt, creds), timing)
    except Exception:  # the write goes on; the next write or read retries
        log.warning("could not recover abandoned writes of %s", creds.location, exc_info=True)
        return 0


def finish_abandoned_jobs(fmt: str, creds: TableCredentials,
                          write_creds: Callable[[], TableCredentials],
                          timing: JobTiming | None = None) -> int:
    """A reader's part: find (read credential) a Delta or Lance job whose driver died, and only
    then ask for a write credential and finish it. Best effort: a read-only caller reads on,
    with a warning."""
    store = job_store(creds)
    if store is None:
        return 0
    try:
        if not job_intent.abandoned(*store, resolver_for(fmt, creds), timing):
            return 0
        return recover_jobs(fmt, write_creds(), timing)
    except Exception:  # the read goes on with the table as it is
        log.warning("could not remove the files of an abandoned write of %s (a write "
                    "credential is needed)", creds.location, exc_info=True)
        return 0


class CommitUnknownError(RuntimeError):
    """A commit call failed and the table could not show whether it landed (files kept)."""


def delta_app_id(write_id: str) -> str:
    """The Delta transaction id (``txn.appId``) a write commits with: its proof in the log."""
    return f"lakegate-{write_id}"


def delta_committed(creds: TableCredentials, write_id: str) -> bool | None:
    """Whether the Delta log holds this write's commit (None: the log cannot be read)."""
    from deltalake import DeltaTable

    options = creds.delta_storage_options()

    def read() -> bool:
        if not DeltaTable.is_deltatable(creds.location, storage_options=options):
            return False
        table = DeltaTable(creds.location, storage_options=options)
        return table.transaction_version(delta_app_id(write_id)) is not None
    try:
        return retried(read)
    except Exception:  # the log cannot answer: undecided
        log.warning("could not read the Delta log of write %s", write_id, exc_info=True)
        return None


def discard_delta(creds: TableCredentials, write_id: str,
                  intent: JobIntent | None = None) -> None:
    """The abort of a Delta job: delete its files unless the log may reference them (its
    commit landed, or the log cannot be read: kept, logged; the intent stays for a later
    recovery), then remove its intent."""
    state = delta_committed(creds, write_id)
    if state is not False:
        log.error("abort of write %s keeps its files: the Delta log %s", write_id,
                  "holds its commit" if state else "could not be read")
        if state:
            end_job(intent)
        return
    retried(lambda: drop_job_files(creds, write_id, keep=()))
    end_job(intent)


def _delta_transaction(creds: TableCredentials, schema: pa.Schema, files: Sequence[Any], *,
                       overwrite: bool, write_id: str = "") -> None:
    from deltalake.transaction import AddAction

    options = creds.delta_storage_options()
    adds = [
        AddAction(path=f.path, size=f.size, partition_values={}, modification_time=f.modified_ms,
                  data_change=True, stats=json.dumps({"numRecords": f.rows}))
        for f in files
    ]
    delta_commit(creds.location, options, schema, adds, overwrite=overwrite, write_id=write_id)


def delta_commit(location: str, options: dict[str, str], schema: pa.Schema, adds: Sequence[Any],
                 *, overwrite: bool, write_id: str = "") -> None:
    """One Delta commit of ``adds`` (``AddAction``), creating the table when there is none;
    with ``write_id`` the commit carries the transaction :func:`delta_app_id`.

    Of two jobs creating the table at once one loses the create (version 0 exists by then); it
    then commits to the table the other created, unless its own create did land after all.
    """
    from deltalake import DeltaTable, Schema
    from deltalake.transaction import (
        AddAction,
        CommitProperties,
        RemoveAction,
        Transaction,
        create_table_with_add_actions,
    )

    mode: Literal["overwrite", "append"] = "overwrite" if overwrite else "append"
    props = (CommitProperties(app_transactions=[Transaction(delta_app_id(write_id), 1)])
             if write_id else None)
    if not DeltaTable.is_deltatable(location, storage_options=options):
        try:
            create_table_with_add_actions(location, Schema.from_arrow(schema), list(adds),
                                          mode=mode, storage_options=options,
                                          commit_properties=props)
            return
        except Exception:
            if not DeltaTable.is_deltatable(location, storage_options=options):
                raise
            table = DeltaTable(location, storage_options=options)
            if write_id and table.transaction_version(delta_app_id(write_id)) is not None:
                return  # our create committed; the error came after it
            uris = table.file_uris()
            if adds and all(any(u.endswith(f"/{a.path}") for u in uris) for a in adds):
                return  # our create committed; the error came after it
    table = DeltaTable(location, storage_options=options)
    actions: list[AddAction | RemoveAction] = [*adds]  # the API takes the wider list type
    table.create_write_transaction(actions, mode=mode, schema=schema, commit_properties=props)


def drop_job_files(creds: TableCredentials, write_id: str, keep: Sequence[str]) -> list[str]:
    """Delete the job's visible files (named by its write id) that are not in ``keep``."""
    fs, root = creds.pyarrow_filesystem(), fs_path(creds.location)
    kept = set(keep)
    doomed = [rel for rel in list_files(fs, root) if write_id_of(rel) == write_id
              and rel not in kept]
    delete_under(creds, creds.location, doomed)
    return doomed


def commit_lance(creds: TableCredentials, schema: pa.Schema, fragments_json: Sequence[str], *,
                 overwrite: bool, read_version: int | None, write_id: str = "",
                 intent: JobIntent | None = None, records: Sequence[str] = (),
                 seen: Seen | None = None) -> None:
    """One Lance commit of the fragments and, alongside it (S3, ADLS, GCS; ``write_id`` given),
    the attempt ledger's cleanup of every fragment file the commit does not use (``records``:
    the ledger records of the attempts that reported the fragments); the job's intent goes once
    both are done (a failed cleanup keeps it, for a recoverer to finish).

    Overwrite replaces whatever version is current (last writer wins, a serial order). Append
    never overwrites: it commits against the version planning read, which Lance rebases over
    the appends committed since, and onto the result of a concurrent overwrite. A job that
    finds no dataset (append or overwrite) first creates an empty one (on S3 only the holder of
    the create claim does, :func:`create_lance`), and Lance's own commit retries rebase
    concurrent appends (``max_retries``). A failed commit call is resolved from the versions
    (:func:`lance_committed`): landed, the job succeeds; undecidable, :class:`CommitUnknownError`.
    ``intent`` (S3, ADLS, GCS) is fenced first, as in :func:`publish_delta`, with the version
    planning read (``read_version``, which a recoverer searches from for the write id).
    """
    ledger = lance_ledger(creds) if write_id else None
    used = lance_files(fragments_json)
    with fenced(intent, seen, files=used, read_version=read_version), \
            alongside(None if ledger is None else lambda: _clean_ledger(ledger, write_id, used,
                                                                        records)) as cleaning:
        _commit_lance(creds, schema, fragments_json, overwrite=overwrite,
                      read_version=read_version, ledger=ledger, write_id=write_id,
                      intent=intent)
    if cleaning is None or cleaning.result():
        end_job(intent, settled=cleaning is not None)
    elif intent is not None:
        log.warning("write %s committed; its job intent stays until the next write or read of "
                    "the table finishes the cleanup of its attempt ledger", write_id)


def _clean_ledger(ledger: tuple[Any, S3Location], write_id: str, used: Sequence[str],
                  records: Sequence[str]) -> bool:
    """Delete the files of the attempts the commit does not use, then the records; returns
    whether that succeeded. Need not precede the commit call: the commit uses only reported
    attempts, and every reported attempt checked in before the listing. Never raises: the
    commit may have landed meanwhile, and what a failure leaves is debris, which the job's
    intent (kept) lets a recoverer remove (``LanceJobs.settle``)."""
    return after_commit("removing the unused fragment files", write_id,
                        lambda: attempts.discard_unused(*ledger, write_id, used, records))


@contextmanager
def alongside(step: Callable[[], T] | None) -> Iterator[Future[T] | None]:
    """Run ``step`` in a helper thread while the body runs, which gets its future (None: no
    step); leaving waits for the step, whether or not the body raised.

    Why for the Lance ledger: deleting what no commit uses need not wait for the commit call
    (:func:`_clean_ledger`), so it overlaps it (about as long as the commit call itself on a
    small write, issue 36). The thread is one of the process's helpers (``helper_pool``).
    """
    if step is None:
        yield None
        return
    future = helpers().submit(step)
    try:
        yield future
    finally:
        wait([future])


def lance_ledger(creds: TableCredentials) -> tuple[Any, S3Location] | None:
    """``(store, location)`` for the attempt ledger (S3, ADLS, GCS), else None."""
    return (table_store(creds), S3Location.parse(creds.location)) if stages(creds) else None


def _commit_lance(creds: TableCredentials, schema: pa.Schema, fragments_json: Sequence[str], *,
                  overwrite: bool, read_version: int | None,
                  ledger: tuple[Any, S3Location] | None, write_id: str,
                  intent: JobIntent | None = None) -> None:
    import lance
    from lance.fragment import FragmentMetadata

    fragments = [FragmentMetadata.from_json(f) for f in fragments_json]
    options = creds.lance_storage_options()
    # the planned version, as Lance's own writers do: an append rebases over appends committed
    # since (Lance's conflict resolution), and one Lance cannot rebase (over an overwrite) is
    # retried below on the version then current; no read of the dataset on the common path
    version = read_version if read_version is not None else lance_version(creds)
    if version is None:  # an overwrite too: a create outside the claim would race the holder's
        version = create_lance(creds.location, options, schema, ledger, write_id)
    operation = (lance.LanceOperation.Overwrite(schema, fragments) if overwrite
                 else lance.LanceOperation.Append(fragments))
    for attempt in range(LANCE_CONFLICT_RETRIES + 1):
        if attempt and intent is not None:  # each commit call starts on a fresh lease
            intent.fence()
        transaction = lance.Transaction(version, operation,
                                        transaction_properties={WRITE_ID_PROPERTY: write_id})
        try:
            lance.LanceDataset.commit(creds.location, transaction, storage_options=options)
            return
        except BaseException as exc:
            state = lance_committed(creds.location, options, write_id, since=version)
            if state is None:
                raise CommitUnknownError(
                    f"the Lance commit of write {write_id} at {creds.location} failed ({exc!r}) "
                    f"and the versions could not show whether it landed: its fragment files "
                    f"are KEPT; look for transaction property {WRITE_ID_PROPERTY}={write_id} "
                    f"before retrying the job") from exc
            if state:
                log.warning("the Lance commit of write %s failed (%r) but landed", write_id, exc)
                return
            # an append Lance cannot rebase over a concurrent overwrite: append to its result
            if overwrite or attempt == LANCE_CONFLICT_RETRIES or not _lance_conflict(exc):
                raise
        version = lance_version(creds)
        if version is None:
            raise RuntimeError(f"the Lance dataset at {creds.location} vanished during a commit")


def _lance_conflict(exc: BaseException) -> bool:
    from lance.commit import CommitConflictError

    return isinstance(exc, CommitConflictError)


def lance_committed(location: str, options: dict[str, str], write_id: str,
                    since: int | None) -> bool | None:
    """Whether a version after ``since`` is this write's commit (its transaction properties
    name the write id); None: the dataset cannot be read."""
    import lance

    if not write_id:
        return False

    def read() -> bool:
        try:
            dataset = lance.dataset(location, storage_options=options)
        except ValueError as exc:
            if "not found" in str(exc):
                return False  # no dataset: nothing landed
            raise
        for version in range(int(dataset.latest_version), (since or 0), -1):
            transaction = dataset.read_transaction(version)
            if transaction is not None and (
                    transaction.transaction_properties or {}).get(WRITE_ID_PROPERTY) == write_id:
                return True
        return False
    try:
        return retried(read)
    except Exception:  # the store cannot answer: undecided
        log.warning("could not read the Lance versions of write %s", write_id, exc_info=True)
        return None


def create_lance(location: str, options: dict[str, str], schema: pa.Schema,
                 ledger: tuple[Any, S3Location] | None, write_id: str) -> int:
    """Create the empty dataset a job found missing; returns the version to commit on.

    Lance's create is not exclusive: of two at once, the later commits as an Overwrite on top of
    the first, wiping an append or overwrite that landed in between (or failing it). On S3, ADLS
    and GCS only the holder of the ledger's create claim creates; the other jobs wait until the
    dataset exists. Elsewhere (no conditional PUT here) every job tries to create, as before.
    """
    import lance

    deadline = time.monotonic() + LANCE_CREATE_WAIT_S
    while True:
        if ledger is None or attempts.claim_create(*ledger, write_id):
            try:
                lance.write_dataset(schema.empty_table(), location, mode="create",
                                    storage_options=options)
            except OSError:  # it exists by now (created outside the claim)
                pass
        version = _dataset_version(location, options)
        if version is not None:
            return version
        if time.monotonic() > deadline:
            raise RuntimeError(f"could not create or find the Lance dataset at {location}")
        time.sleep(0.1)


def lance_files(fragments_json: Sequence[str]) -> list[str]:
    """The data files of fragments (paths relative to the dataset)."""
    from lance.fragment import FragmentMetadata

    return [f"data/{data_file.path}" for f in fragments_json
            for data_file in FragmentMetadata.from_json(f).files]


def drop_lance_fragments(creds: TableCredentials, fragments_json: Sequence[str],
                         write_id: str = "", since: int | None = None,
                         with_intent: bool = False) -> None:
    """Delete the data files of uncommitted fragments (a failed job's, or a failed task's); with
    ``write_id`` (the job's abort) also every file its attempts recorded in the ledger, unless a
    version after ``since`` may be the job's commit (it landed: only what the reported
    fragments do not use goes; the dataset cannot be read: every file is kept, logged);
    ``with_intent``: then the job's intent is removed (not while files may remain)."""
    intent = job_of(creds, write_id) if write_id and with_intent else None
    if write_id:
        state = lance_committed(creds.location, creds.lance_storage_options(), write_id, since)
        if state is not False:
            log.error("abort of write %s keeps its fragment files: the Lance dataset %s",
                      write_id, "holds its commit" if state else "could not be read")
            if state:  # its cleanup, then the intent (the reported fragments are the commit's)
                ledger = lance_ledger(creds)
                if ledger is not None:
                    attempts.discard_unused(*ledger, write_id, lance_files(fragments_json))
                end_job(intent, settled=ledger is not None)
            return
    retried(lambda: delete_under(creds, creds.location, lance_files(fragments_json)))
    ledger = lance_ledger(creds) if write_id else None
    if ledger is not None:  # raises: the intent stays for a recoverer to finish the cleanup
        attempts.discard_unused(*ledger, write_id, ())
    end_job(intent, settled=ledger is not None)


def delete_under(creds: TableCredentials, base: str, relative: Sequence[str]) -> None:
    """Delete files under ``base`` (a URI inside the table); already gone is fine.

    Why boto3 on S3: pyarrow's ``delete_file`` recreates an empty ``dir/`` marker object when it
    removes a directory's last file, and that marker would be debris under the table.
    """
    if not relative:
        return
    if stages(creds):
        store, where = table_store(creds), S3Location.parse(base)
        for rel in relative:
            store.delete(where.key(rel))
        return
    delete_files(creds.pyarrow_filesystem(), fs_path(base), relative)


def lance_version(creds: TableCredentials) -> int | None:
    """The dataset's current version (``None``: no dataset yet).

    On S3, ADLS and GCS from one short listing of the manifests (``lance_manifests``), without
    opening the dataset; else, or when the listing shows no V2 manifest or fails, by opening it.
    A listing that lags a commit made a moment ago may show the version before it, never a newer
    one: each caller takes a version at most current (an append rebases over what landed since,
    a recoverer searches from it, a create is decided only when no manifest shows).
    """
    if stages(creds):
        try:
            newest = newest_version(table_store(creds), S3Location.parse(creds.location))
        except Exception:  # the open below answers (or fails) as before
            log.debug("listing the Lance manifests of %s failed; opening the dataset",
                      creds.location, exc_info=True)
        else:
            if newest is not None:
                return newest
    return _dataset_version(creds.location, creds.lance_storage_options())


def _dataset_version(location: str, options: dict[str, str]) -> int | None:
    import lance

    try:
        return int(lance.dataset(location, storage_options=options).version)
    except (ValueError, OSError):
        return None
