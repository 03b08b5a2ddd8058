"""The commit protocol of Lance datasets: one Lance commit of the reported fragments.

Plan: the job's intent with the version planning read. Stage: tasks write fragments and record
their files in the attempt ledger (``engine/attempts.py``). Point of no return: the Lance commit
call, whose transaction properties carry the write id (:data:`WRITE_ID_PROPERTY`). Roll forward:
the ledger cleanup of every file the commit does not use. Append never overwrites: it commits
against the version planning read (see :func:`commit_lance`). Recover (:class:`LanceJobs`): a
version carries the write id, or the recorded files go.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, wait
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, TypeVar

from lakegate_client.engine import attempts, job_files, jobs, protocol, retrying, stores
from lakegate_client.engine.formats.lance_manifests import newest_version
from lakegate_client.engine.helper_pool import helpers
from lakegate_client.engine.job_intent import JobIntent, Seen
from lakegate_client.engine.protocol import Job, Reported
from lakegate_client.engine.stores.base import ObjectStore, S3Location

if TYPE_CHECKING:
    import pyarrow as pa

    from lakegate_client import TableCredentials

LANCE_CREATE_WAIT_S = 180.0  # longer than a dead job's create claim lives (STALE_CREATE_S)
WRITE_ID_PROPERTY = "lakegate.write-id"  # in the transaction (Lance) a write commits
LANCE_CONFLICT_RETRIES = 4  # an append redone after a concurrent overwrite
log = logging.getLogger(__name__)
T = TypeVar("T")


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
        job_files.delete_under(self._creds, self._creds.location,
                               [str(f) for f in intent.get("files", ())])
        if ledger is not None:
            attempts.discard_unused(*ledger, write_id, ())

    def settle(self, intent: dict[str, Any]) -> None:
        """The ledger cleanup ``commit_lance`` makes alongside its commit: every file the
        job's attempts recorded but its commit (the fence's ``files``) does not use."""
        ledger = lance_ledger(self._creds)
        if ledger is not None:
            attempts.discard_unused(*ledger, str(intent["write_id"]),
                                    [str(f) for f in intent.get("files", ())])


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
    with jobs.fenced(intent, seen, files=used, read_version=read_version), \
            alongside(None if ledger is None else lambda: _clean_ledger(ledger, write_id, used,
                                                                        records)) as cleaning:
        _commit_lance(creds, schema, fragments_json, overwrite=overwrite,
                      read_version=read_version, ledger=ledger, write_id=write_id,
                      intent=intent)
    if cleaning is None or cleaning.result():
        jobs.end_job(intent, settled=cleaning is not None)
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
    return retrying.after_commit("removing the unused fragment files", write_id,
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
    if not stores.stages(creds):
        return None
    return stores.table_store(creds), S3Location.parse(creds.location)


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
                jobs.commit_unknown(intent, f"write {write_id}")
                raise protocol.CommitUnknownError(
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
        return retrying.with_retries(read)
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
    intent = jobs.job_of(creds, write_id) if write_id and with_intent else None
    if jobs.left_to_recovery(intent, f"write {write_id}"):  # ambiguous means keep
        return
    if write_id:
        state = lance_committed(creds.location, creds.lance_storage_options(), write_id, since)
        if state is not False:
            log.error("abort of write %s keeps its fragment files: the Lance dataset %s",
                      write_id, "holds its commit" if state else "could not be read")
            if state:  # its cleanup, then the intent (the reported fragments are the commit's)
                ledger = lance_ledger(creds)
                if ledger is not None:
                    attempts.discard_unused(*ledger, write_id, lance_files(fragments_json))
                jobs.end_job(intent, settled=ledger is not None)
            return
    retrying.with_retries(lambda: job_files.delete_under(creds, creds.location,
                                                         lance_files(fragments_json)))
    ledger = lance_ledger(creds) if write_id else None
    if ledger is not None:  # raises: the intent stays for a recoverer to finish the cleanup
        attempts.discard_unused(*ledger, write_id, ())
    jobs.end_job(intent, settled=ledger is not None)


def lance_version(creds: TableCredentials) -> int | None:
    """The dataset's current version (``None``: no dataset yet).

    On S3, ADLS and GCS from one short listing of the manifests (``lance_manifests``), without
    opening the dataset; else, or when the listing shows no V2 manifest or fails, by opening it.
    A listing that lags a commit made a moment ago may show the version before it, never a newer
    one: each caller takes a version at most current (an append rebases over what landed since,
    a recoverer searches from it, a create is decided only when no manifest shows).
    """
    if stores.stages(creds):
        try:
            newest = newest_version(stores.table_store(creds), S3Location.parse(creds.location))
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


class LanceProtocol(jobs.IntentRecovery):
    """:class:`~lakegate_client.engine.protocol.CommitProtocol` of Lance datasets."""

    def plan(self, creds: TableCredentials, job: Job, store: ObjectStore | None) -> Job:
        if store is None:
            return job
        return jobs.plan_job(creds, job, self.recover, read_version=lance_version)

    def commit(self, creds: TableCredentials, job: Job, schema: pa.Schema, reported: Reported,
               timing: object | None = None) -> None:
        commit_lance(creds, schema, reported.fragments, overwrite=job.overwrite,
                     read_version=job.read_version, write_id=job.write_id,
                     intent=jobs.intent_of(creds, job), records=reported.records, seen=job.seen)

    def abort(self, creds: TableCredentials, job: Job, reported: Reported) -> None:
        drop_lance_fragments(creds, reported.fragments, job.write_id, since=job.read_version,
                             with_intent=job.seen is not None)


LANCE = LanceProtocol(LanceJobs)
