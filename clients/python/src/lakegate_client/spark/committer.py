"""The driver's half of a Spark write: publish what the reported task attempts wrote, or nothing.

Why a module of its own: tasks (``writer.py``) only ever *stage* data; every decision about what
becomes visible is made here, once, by the one process that knows which attempts Spark accepted.

- Plain tables and Delta on S3: tasks leave multipart uploads pending (``tables/staged.py``).
  Commit completes the reported ones (plain: under the conflict protocol of
  ``tables/plain_commit.py``; Delta: then one Delta transaction adds them); abort aborts them.
  Both then sweep the job's other pending uploads when the credential may list them.
- Other storage (no multipart API here): tasks write visible files named by the write id; commit
  and abort delete every file of the job that is not published.
- Lance: one commit of the reported fragments; append never overwrites (see ``commit_lance``).
  On S3 the job's attempt ledger (``tables/attempts.py``) removes the fragment files of attempts
  the commit does not use (killed duplicates, tasks finishing after the job ended).
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING, Any, Literal, TypeVar

from lakegate_client.tables import attempts
from lakegate_client.tables.directory import delete_files, fs_path, list_files, write_id_of
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


def sweep(s3: Any, where: S3Location, write_id: str, keep: Sequence[str] = ()) -> int:
    """Abort the job's pending uploads left by failed, duplicate or late attempts.

    Lakekeeper's session policy grants no ``s3:ListBucketMultipartUploads``, so under a vended
    credential this listing is refused (AccessDenied): then nothing is swept here, and those
    invisible uploads wait for the bucket's ``AbortIncompleteMultipartUpload`` lifecycle rule.
    Returns how many uploads were aborted (-1: listing refused).
    """
    try:
        return sweep_uploads(s3, where, write_id, keep)
    except s3.exceptions.ClientError as exc:
        if exc.response.get("Error", {}).get("Code") == "AccessDenied":
            return -1
        raise


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


def after_commit(what: str, write_id: str, cleanup: Callable[[], object]) -> None:
    """Run a cleanup that follows a durable commit, never raising.

    Spark calls ``abort`` when ``commit`` raises, and ``abort`` deletes the job's files: an
    error in the cleanup after the table already references them must not turn into that.
    What is left behind is debris (unreferenced files, pending uploads), logged, once the
    cleanup failed :data:`RETRIES` times.
    """
    try:
        retried(cleanup)
    except Exception:  # debris only: logged, never raised
        log.warning("after the commit of write %s, %s failed", write_id, what, exc_info=True)


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
    s3, where = s3_client(creds), S3Location.parse(creds.location)
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
    if creds.storage != "s3":
        return 0
    try:
        return finish_abandoned_commits(s3_client(creds), S3Location.parse(creds.location),
                                        lambda: s3_client(write_creds()))
    except Exception:  # the read goes on with the table as it is
        log.warning("could not finish an abandoned commit of %s", creds.location, exc_info=True)
        return 0


def publish_delta(creds: TableCredentials, schema: pa.Schema, files: Sequence[Any],
                  uploads: Sequence[PendingUpload], *, overwrite: bool, write_id: str) -> None:
    """Complete the staged files, then add them (``files``: ``WrittenFile``) in one Delta commit.

    Completed-but-uncommitted files are unreferenced (no Delta reader sees them); a failed
    transaction deletes them. A failed commit call may still have landed (a lost answer, a
    timeout): the log then decides (:func:`delta_committed`), and when it cannot be read the
    files are kept and the job fails with :class:`CommitUnknownError`.
    """
    s3 = s3_client(creds) if uploads else None
    where = S3Location.parse(creds.location)
    if s3 is not None:
        complete_uploads(s3, where.bucket, uploads)
    try:
        _delta_transaction(creds, schema, files, overwrite=overwrite, write_id=write_id)
    except BaseException as exc:
        state = delta_committed(creds, write_id)
        if state is None:
            raise CommitUnknownError(
                f"the Delta commit of write {write_id} at {creds.location} failed ({exc!r}) and "
                f"the log could not show whether it landed: its files are KEPT; look for the "
                f"transaction {delta_app_id(write_id)!r} in the log before retrying the job"
            ) from exc
        if not state:
            drop_job_files(creds, write_id, keep=())
            raise
        log.warning("the Delta commit of write %s failed (%r) but landed", write_id, exc)
    if s3 is None:  # tasks wrote visible files: those of failed or duplicate attempts go
        after_commit("removing unused files", write_id,
                     lambda: drop_job_files(creds, write_id, keep=[f.path for f in files]))
    else:  # staged: the completed uploads are the job's only visible files, all committed
        after_commit("the upload sweep", write_id, lambda: sweep(s3, where, write_id))


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


def discard_delta(creds: TableCredentials, write_id: str) -> None:
    """The abort of a Delta job: delete its files unless the log may reference them (its
    commit landed, or the log cannot be read: kept, logged)."""
    state = delta_committed(creds, write_id)
    if state is not False:
        log.error("abort of write %s keeps its files: the Delta log %s", write_id,
                  "holds its commit" if state else "could not be read")
        return
    retried(lambda: drop_job_files(creds, write_id, keep=()))


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
                 records: Sequence[str] = ()) -> None:
    """One Lance commit of the fragments, then (S3, ``write_id`` given) the attempt ledger's
    cleanup of every fragment file the commit does not use (``records``: the ledger records of
    the attempts that reported the fragments).

    Overwrite replaces whatever version is current (last writer wins, a serial order). Append
    never overwrites: it appends against the version that exists at commit time. A job that
    finds no dataset (append or overwrite) first creates an empty one (on S3 only the holder of
    the create claim does, :func:`create_lance`), and Lance's own commit retries rebase
    concurrent appends (``max_retries``). A failed commit call is resolved from the versions
    (:func:`lance_committed`): landed, the job succeeds; undecidable, :class:`CommitUnknownError`.
    """
    ledger = lance_ledger(creds) if write_id else None
    if ledger is not None:
        attempts.close_job(*ledger, write_id)
    _commit_lance(creds, schema, fragments_json, overwrite=overwrite, read_version=read_version,
                  ledger=ledger, write_id=write_id)
    if ledger is not None:
        after_commit("removing the unused fragment files", write_id,
                     lambda: attempts.discard_unused(*ledger, write_id,
                                                     lance_files(fragments_json), records))


def lance_ledger(creds: TableCredentials) -> tuple[Any, S3Location] | None:
    """``(s3 client, location)`` for the attempt ledger (S3 only), else None."""
    return (s3_client(creds), S3Location.parse(creds.location)) if creds.storage == "s3" else None


def _commit_lance(creds: TableCredentials, schema: pa.Schema, fragments_json: Sequence[str], *,
                  overwrite: bool, read_version: int | None,
                  ledger: tuple[Any, S3Location] | None, write_id: str) -> None:
    import lance
    from lance.fragment import FragmentMetadata

    fragments = [FragmentMetadata.from_json(f) for f in fragments_json]
    options = creds.lance_storage_options()
    version = read_version if overwrite and read_version is not None else lance_version(creds)
    if version is None:  # an overwrite too: a create outside the claim would race the holder's
        version = create_lance(creds.location, options, schema, ledger, write_id)
    operation = (lance.LanceOperation.Overwrite(schema, fragments) if overwrite
                 else lance.LanceOperation.Append(fragments))
    for attempt in range(LANCE_CONFLICT_RETRIES + 1):
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
    the first, wiping an append or overwrite that landed in between (or failing it). On S3 only
    the holder of the ledger's create claim creates; the other jobs wait until the dataset
    exists. Elsewhere (no conditional PUT here) every job tries to create, as before.
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
                         write_id: str = "", since: int | None = None) -> None:
    """Delete the data files of uncommitted fragments (a failed job's, or a failed task's); with
    ``write_id`` (the job's abort) also every file its attempts recorded in the ledger, unless a
    version after ``since`` may be the job's commit (it landed, or the dataset cannot be read:
    every file is kept, logged)."""
    if write_id:
        state = lance_committed(creds.location, creds.lance_storage_options(), write_id, since)
        if state is not False:
            log.error("abort of write %s keeps its fragment files: the Lance dataset %s",
                      write_id, "holds its commit" if state else "could not be read")
            return
    retried(lambda: delete_under(creds, creds.location, lance_files(fragments_json)))
    ledger = lance_ledger(creds) if write_id else None
    if ledger is not None:
        attempts.close_job(*ledger, write_id)
        attempts.discard_unused(*ledger, write_id, ())


def delete_under(creds: TableCredentials, base: str, relative: Sequence[str]) -> None:
    """Delete files under ``base`` (a URI inside the table); already gone is fine.

    Why boto3 on S3: pyarrow's ``delete_file`` recreates an empty ``dir/`` marker object when it
    removes a directory's last file, and that marker would be debris under the table.
    """
    if not relative:
        return
    if creds.storage == "s3":
        s3, where = s3_client(creds), S3Location.parse(base)
        for rel in relative:
            s3.delete_object(Bucket=where.bucket, Key=where.key(rel))
        return
    delete_files(creds.pyarrow_filesystem(), fs_path(base), relative)


def lance_version(creds: TableCredentials) -> int | None:
    """The dataset's current version (``None``: no dataset yet)."""
    return _dataset_version(creds.location, creds.lance_storage_options())


def _dataset_version(location: str, options: dict[str, str]) -> int | None:
    import lance

    try:
        return int(lance.dataset(location, storage_options=options).version)
    except (ValueError, OSError):
        return None
