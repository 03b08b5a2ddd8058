"""A Spark job's intent as the driver and the tasks hold it: written at planning, its lease
renewed while tasks write and the commit runs, fenced before the point of no return, removed
when the job ended (the intent itself: ``engine/job_intent.py``).
"""

from __future__ import annotations

import dataclasses
import json
import logging
from collections.abc import Callable, Iterator
from concurrent.futures import wait
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from lakegate_client.engine import job_intent, stores
from lakegate_client.engine.helper_pool import helpers
from lakegate_client.engine.job_intent import JobIntent, JobTiming, LeaseKeeper, Seen
from lakegate_client.engine.protocol import Job
from lakegate_client.engine.stores.base import (
    ObjectStore,
    S3Location,
)

if TYPE_CHECKING:
    from lakegate_client import TableCredentials

log = logging.getLogger(__name__)


def job_store(creds: TableCredentials) -> tuple[ObjectStore, S3Location] | None:
    """Where a Delta, Iceberg or Lance job keeps its intent (``tables/job_intent.py``): the
    table's store (S3, ADLS, GCS: ``table_store``) and location, or None elsewhere (no
    conditional PUT there: a crashed job's files are left to the format's own cleanup)."""
    if not stores.stages(creds):
        return None
    return stores.table_store(creds), S3Location.parse(creds.location)


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


def plan_job(creds: TableCredentials, job: Job, recover: Callable[[TableCredentials], int],
             read_version: Callable[[TableCredentials], int | None] | None = None) -> Job:
    """The planning of a Delta or Lance job: write its intent (:func:`start_job`) while, beside
    it, abandoned jobs are recovered (``recover``: never raises; it never commits, so the
    version read is unchanged, and it leaves a fresh intent alone, this job's own too) and the
    version the commit builds on is read (``read_version``: Lance; the fence records it, for a
    recoverer). Waits for both, whether or not the create raised."""
    recovering = helpers().submit(recover, creds)
    version = helpers().submit(read_version, creds) if read_version is not None else None
    try:
        seen = start_job(creds, job.fmt, job.write_id, staged=job.staged)
        read = version.result() if version is not None else None
    finally:
        wait([recovering])
        if version is not None:
            wait([version])
    return dataclasses.replace(job, seen=seen, read_version=read)


def intent_of(creds: TableCredentials, job: Job) -> JobIntent | None:
    """The job's intent as this process sees it, when planning wrote one."""
    return job_of(creds, job.write_id) if job.seen is not None else None


def recover_jobs(resolver_of: Callable[[TableCredentials], job_intent.Resolver],
                 creds: TableCredentials, timing: JobTiming | None = None) -> int:
    """A writer's planning: finish every job whose driver died (write credential; how, the
    format's ``resolver_of`` decides); returns how many. Best effort: a failure is logged and
    the write goes on."""
    store = job_store(creds)
    if store is None:
        return 0
    try:
        return job_intent.recover_jobs(*store, resolver_of(creds), timing)
    except Exception:  # the write goes on; the next write or read retries
        log.warning("could not recover abandoned writes of %s", creds.location, exc_info=True)
        return 0


def finish_abandoned_jobs(resolver_of: Callable[[TableCredentials], job_intent.Resolver],
                          creds: TableCredentials, write_creds: Callable[[], TableCredentials],
                          timing: JobTiming | None = None) -> int:
    """A reader's part: find (read credential) a job whose driver died, and only then ask for
    a write credential and finish it. Best effort: a read-only caller reads on, with a
    warning."""
    store = job_store(creds)
    if store is None:
        return 0
    try:
        if not job_intent.abandoned(*store, resolver_of(creds), timing):
            return 0
        return recover_jobs(resolver_of, write_creds(), timing)
    except Exception:  # the read goes on with the table as it is
        log.warning("could not remove the files of an abandoned write of %s (a write "
                    "credential is needed)", creds.location, exc_info=True)
        return 0


def commit_unknown(intent: JobIntent | None, what: str) -> None:
    """Before a commit raises :class:`~lakegate_client.engine.protocol.CommitUnknownError`:
    mark the job's intent (:meth:`JobIntent.mark_unknown`) so that its abort leaves the files to
    the recovery. Never raises (logged: the abort then decides from one read, as before)."""
    if intent is None:
        return
    try:
        intent.mark_unknown()
    except Exception:  # the error the caller raises says the files are kept
        log.warning("could not mark the intent of %s unknown", what, exc_info=True)


def left_to_recovery(intent: JobIntent | None, what: str) -> bool:
    """Whether a job's abort must leave its files (and its intent) to the recovery, "ambiguous
    means keep": its commit's outcome is unknown (:func:`commit_unknown`), so one read of the
    table that shows no commit proves nothing (it may lag, or the call may land after it). The
    recovery decides once the lease and the commit bound ran out, from the table
    (``job_intent.recover_jobs``). An intent that cannot be read keeps them too. ``what``: the
    job, for the log."""
    if intent is None:
        return False
    try:
        unknown = intent.outcome_unknown()
    except Exception:  # undecidable: keep
        log.warning("abort of %s keeps its files: its job intent could not be read", what,
                    exc_info=True)
        return True
    if unknown:
        log.error("abort of %s keeps its files and its intent: its commit may still land; the "
                  "next write or read decides once its lease and commit bound ran out", what)
    return unknown


class IntentRecovery:
    """The recovery steps of a format whose jobs keep a job intent (Delta, Lance): ``recover``
    and ``finish_abandoned`` of :class:`~lakegate_client.engine.protocol.CommitProtocol`, with
    the format's own :class:`~lakegate_client.engine.job_intent.Resolver` (``resolver_of``)."""

    def __init__(self, resolver_of: Callable[[TableCredentials], job_intent.Resolver]) -> None:
        self._resolver_of = resolver_of

    def recover(self, creds: TableCredentials, timing: JobTiming | None = None) -> int:
        return recover_jobs(self._resolver_of, creds, timing)

    def finish_abandoned(self, creds: TableCredentials,
                         write_creds: Callable[[], TableCredentials]) -> int:
        return finish_abandoned_jobs(self._resolver_of, creds, write_creds)
