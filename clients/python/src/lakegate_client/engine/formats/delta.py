"""The commit protocol of Delta Lake tables: one Delta transaction adds the job's files.

Plan: the job's intent (``engine/jobs.py``). Stage: tasks leave staged uploads (S3, ADLS) or
visible ``part-<write id>-*`` files elsewhere. Point of no return: the Delta commit call, which
carries the transaction ``lakegate-<write id>`` (:func:`delta_app_id`), its proof in the log.
Roll forward: the sweep of the job's other uploads. Abort: delete the job's files unless the log
may reference them. Recover (:class:`DeltaJobs`): the log holds the transaction, or the files go.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Literal

from lakegate_client.engine import job_files, jobs, protocol, retrying, staged, stores
from lakegate_client.engine.job_intent import JobIntent, Seen
from lakegate_client.engine.protocol import Job, Reported
from lakegate_client.engine.staged import complete_uploads
from lakegate_client.engine.stores.base import (
    ObjectStore,
    PendingUpload,
    S3Location,
)

if TYPE_CHECKING:
    import pyarrow as pa

    from lakegate_client import TableCredentials

log = logging.getLogger(__name__)


def publish_delta(creds: TableCredentials, schema: pa.Schema, files: Sequence[Any],
                  uploads: Sequence[PendingUpload], *, overwrite: bool, write_id: str,
                  intent: JobIntent | None = None, seen: Seen | None = None) -> None:
    """Complete the staged files, then add them (``files``: ``WrittenFile``) in one Delta commit.

    ``intent`` (S3, ADLS: the job's, written at planning, as ``seen`` then) is fenced first: a
    job taken over after its lease expired commits nothing
    (:class:`~lakegate_client.engine.job_intent.JobFencedError`).
    Completed-but-uncommitted files are unreferenced (no Delta reader sees them); a failed
    transaction deletes them. A failed commit call may still have landed (a lost answer, a
    timeout): the log then decides (:func:`delta_committed`), and when it cannot be read the
    files (and the intent, for a later recovery) are kept and the job fails with
    :class:`CommitUnknownError`.
    """
    s3 = stores.table_store(creds) if uploads else None
    where = S3Location.parse(creds.location)
    with jobs.fenced(intent, seen, uploads=[[u.key, u.upload_id] for u in uploads],
                     files=[f.path for f in files]):
        if s3 is not None:
            complete_uploads(s3, where.bucket, uploads)
        try:
            _delta_transaction(creds, schema, files, overwrite=overwrite, write_id=write_id)
        except BaseException as exc:
            state = delta_committed(creds, write_id)
            if state is None:
                jobs.commit_unknown(intent, f"write {write_id}")
                raise protocol.CommitUnknownError(
                    f"the Delta commit of write {write_id} at {creds.location} failed ({exc!r}) "
                    f"and the log could not show whether it landed: its files are KEPT; look for "
                    f"the transaction {delta_app_id(write_id)!r} in the log before retrying the "
                    f"job") from exc
            if not state:
                job_files.drop_job_files(creds, write_id, keep=())
                jobs.end_job(intent)
                raise
            log.warning("the Delta commit of write %s failed (%r) but landed", write_id, exc)
    if s3 is None:  # tasks wrote visible files: those of failed or duplicate attempts go
        used = [f.path for f in files]
        retrying.after_commit("removing unused files", write_id,
                              lambda: job_files.drop_job_files(creds, write_id, keep=used))
    jobs.end_job(intent)
    if s3 is not None:  # staged: the completed uploads are the job's only visible files
        retrying.after_commit("the upload sweep", write_id,
                              lambda: staged.sweep(s3, where, write_id))


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
        staged.abort_recorded(self._creds, intent)
        job_files.drop_job_files(self._creds, write_id, keep=())

    def settle(self, intent: dict[str, Any]) -> None:
        """The upload sweep ``publish_delta`` makes after its commit (staged jobs)."""
        if intent.get("staged") and stores.stages(self._creds):
            staged.sweep(stores.table_store(self._creds), S3Location.parse(self._creds.location),
                         str(intent["write_id"]))


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
        return retrying.with_retries(read)
    except Exception:  # the log cannot answer: undecided
        log.warning("could not read the Delta log of write %s", write_id, exc_info=True)
        return None


def discard_delta(creds: TableCredentials, write_id: str,
                  intent: JobIntent | None = None) -> None:
    """The abort of a Delta job: delete its files unless the log may reference them (its
    commit landed, or the log cannot be read: kept, logged; the intent stays for a later
    recovery), then remove its intent. After an ambiguous commit (its intent says the outcome
    is unknown) everything is kept for the recovery
    (:func:`~lakegate_client.engine.jobs.left_to_recovery`)."""
    if jobs.left_to_recovery(intent, f"write {write_id}"):
        return
    state = delta_committed(creds, write_id)
    if state is not False:
        log.error("abort of write %s keeps its files: the Delta log %s", write_id,
                  "holds its commit" if state else "could not be read")
        if state:
            jobs.end_job(intent)
        return
    retrying.with_retries(lambda: job_files.drop_job_files(creds, write_id, keep=()))
    jobs.end_job(intent)


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


class DeltaProtocol(jobs.IntentRecovery):
    """:class:`~lakegate_client.engine.protocol.CommitProtocol` of Delta tables."""

    def plan(self, creds: TableCredentials, job: Job, store: ObjectStore | None) -> Job:
        if store is None:
            return job
        return jobs.plan_job(creds, job, self.recover)

    def commit(self, creds: TableCredentials, job: Job, schema: pa.Schema, reported: Reported,
               timing: object | None = None) -> None:
        publish_delta(creds, schema, reported.files, reported.uploads, overwrite=job.overwrite,
                      write_id=job.write_id, intent=jobs.intent_of(creds, job), seen=job.seen)

    def abort(self, creds: TableCredentials, job: Job, reported: Reported) -> None:
        if job.staged:
            s3, where = stores.table_store(creds), S3Location.parse(creds.location)
            staged.discard_staged(s3, where, reported.uploads, job.write_id)
        # files its log may reference stay (and all of them after an ambiguous commit)
        discard_delta(creds, job.write_id, jobs.intent_of(creds, job))


DELTA = DeltaProtocol(DeltaJobs)
