"""Commit a job's staged files into a plain directory table on an object store: a serial order
of the jobs, a loud :class:`WriteConflictError`, or (after a crash) a commit that the next writer
or reader finishes. Never a torn table once anyone touched it.

Every store call goes through :class:`~lakegate_client.engine.stores.base.ObjectStore` (the
functions take a store, or a boto3 S3 client that they wrap in an ``S3Store``).

Why: a plain table has no log, so two jobs that each "delete every file that is not mine" tear it,
and a commit is many calls (complete N uploads, delete M files), any of which can fail or be the
last one a dying driver makes.

- **Planning** (driver, before tasks run) first rolls forward any abandoned commit (below), then
  records the table's data files with their ETags and the commit marker ``_lakegate_commit.json``.
- **The intent.** A commit first writes ``_lakegate_intent-<write id>.json`` (``If-None-Match:
  *``): the plan (every upload to complete, every file to delete), its owner and a lease that a
  heartbeat renews (``If-Match`` its own ETag) while the commit runs. All ``_``-prefixed: hidden
  from every reader.
- **Overwrite exclusion.** The intent starts ``staged``. The commit swaps the marker to
  "committing" against the marker it planned with (``If-Match``, or ``If-None-Match: *``), so of
  two overwrites planned against the same state only one proceeds, then re-lists: a file added,
  replaced or removed meanwhile is a conflict. Only then does the intent become ``committing``.
  A job that planned while a live overwrite was committing conflicts too.
- **Point of no return**: the first ``CompleteMultipartUpload`` call (an append's intent is
  ``committing`` from the start). Before it, a failure fences the intent (``aborted``), releases
  the marker and raises: nothing became visible and the caller aborts the uploads. After it,
  every step (complete, delete, release the marker, remove the intent) is retried, then logged,
  never raised: Spark's abort would otherwise delete rows that are already committed.
- **Recovery.** Anyone (a writer planning, a reader planning, the same job's abort) who finds an
  intent whose lease expired takes it over with a PUT conditional on its ETag (so exactly one
  recoverer wins, and the old owner's next renewal fails), then rolls a ``committing`` intent
  forward (every step is idempotent) or discards a ``staged``/``aborted`` one.

Remaining windows (documented in the README): a writer that does not use the marker and lands a
file after an overwrite's re-list but before its deletes survives next to the new rows; a reader
listing during the complete/delete steps sees a mix (nothing here is one atomic step); leases
compare wall clocks of different hosts.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

from lakegate_client._errors import ConflictError
from lakegate_client.engine import job_files, retrying, staged, stores
from lakegate_client.engine.conditional_writes import put_conditional
from lakegate_client.engine.protocol import Job, Reported
from lakegate_client.engine.retrying import retried
from lakegate_client.engine.stores import as_store
from lakegate_client.engine.stores.base import ObjectStore, PendingUpload, S3Location
from lakegate_client.tables.directory import data_files, fs_path, replace_files

if TYPE_CHECKING:
    import pyarrow as pa

    from lakegate_client import TableCredentials
    from lakegate_client.engine.job_intent import JobTiming

__all__ = ["INTENT_PREFIX", "MARKER", "CommitTiming", "PlainPlan", "WriteConflictError",
           "abort_plain", "commit_plain", "delete_job_files", "finish_abandoned", "plan_plain",
           "recover_plain"]

MARKER = "_lakegate_commit.json"
INTENT_PREFIX = "_lakegate_intent-"
LEASE_S = 60.0
RETRIES = 4
BACKOFF_S = 0.5  # times the attempt number
COMMIT_WORKERS = 8  # below botocore's default connection pool (10)
log = logging.getLogger(__name__)
T = TypeVar("T")


class WriteConflictError(ConflictError):
    """Another writer changed the table between this job's planning and its commit."""


@dataclass(frozen=True)
class CommitTiming:
    """Clock, sleep and lease of the protocol (injected: tests shrink or fake them)."""

    now: Callable[[], float] = time.time
    sleep: Callable[[float], None] = time.sleep
    lease_s: float = field(default_factory=lambda: LEASE_S)
    retries: int = RETRIES
    backoff_s: float = field(default_factory=lambda: BACKOFF_S)
    # Called with "point_of_no_return" just after the first upload completion (test faults).
    on_step: Callable[[str], None] = lambda _step: None
    # Completes (after the first) and deletes in flight at once past the point of no return.
    workers: int = COMMIT_WORKERS


@dataclass(frozen=True)
class PlainPlan:
    """The table as a job planned against it (picklable; no secrets)."""

    files: tuple[tuple[str, str], ...]  # (relative path, ETag) of every data file
    marker_etag: str | None
    blocked_by: str | None  # write id of a live overwrite that was committing at planning


def list_objects(s3: Any, where: S3Location, under: str = "") -> dict[str, str]:
    """Every object under the table (``under``: a relative key prefix): path → ETag."""
    listed = as_store(s3, where.bucket).list(f"{where.prefix}/{under}")
    return {where.relative(key): etag for key, etag in listed.items()}


def _data(s3: Any, where: S3Location, fmt: str) -> dict[str, str]:
    objects = list_objects(s3, where)
    return {rel: objects[rel] for rel in data_files(objects, fmt)}


def _read_json(s3: Any, where: S3Location, rel: str) -> tuple[str | None, dict[str, Any]]:
    found = as_store(s3, where.bucket).get(where.key(rel))
    if found is None:
        return None, {}
    body = json.loads(found[0] or b"{}")
    return found[1], body if isinstance(body, dict) else {}


def intent_name(write_id: str) -> str:
    return f"{INTENT_PREFIX}{write_id}.json"


def _retried(what: str, step: Callable[[], T], timing: CommitTiming) -> T:
    """Run ``step``; on an error retry with backoff, then re-raise the last error."""
    return retried(what, step, retries=timing.retries, backoff_s=timing.backoff_s,
                   sleep=timing.sleep)


@dataclass
class _Intent:
    """One commit's intent object and this process's hold on it (its ETag)."""

    s3: Any
    where: S3Location
    body: dict[str, Any]
    etag: str | None
    timing: CommitTiming
    lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def key(self) -> str:
        return self.where.key(intent_name(str(self.body["write_id"])))

    @property
    def uploads(self) -> list[PendingUpload]:
        return [PendingUpload(str(k), str(u), tuple((int(n), str(e)) for n, e in parts), int(s))
                for k, u, parts, s in self.body.get("uploads", [])]

    def write(self, **changes: Any) -> bool:
        """Replace the intent (``If-Match`` our ETag, ``If-None-Match`` at first) with the lease
        renewed; False when someone else took it over (we are fenced)."""
        with self.lock:
            body = {**self.body, **changes, "at": self.timing.now()}
            etag = put_conditional(self.s3, self.where.bucket, self.key,
                                   json.dumps(body).encode(), self.etag)
            if etag is None:
                return False
            self.body, self.etag = body, etag
            return True

    def remove(self) -> None:
        as_store(self.s3, self.where.bucket).delete(self.key)


class _Heartbeat:
    """Renews an intent's lease every quarter lease until stopped or fenced."""

    def __init__(self, intent: _Intent) -> None:
        self._intent = intent
        self._stop = threading.Event()
        self.fenced = False
        self._thread = threading.Thread(target=self._run, name="lakegate-commit-lease",
                                        daemon=True)

    def __enter__(self) -> _Heartbeat:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join(timeout=self._intent.timing.lease_s)

    def _run(self) -> None:
        while not self._stop.wait(max(self._intent.timing.lease_s / 4, 0.01)):
            try:
                if not self._intent.write():
                    self.fenced = True
                    log.warning("write %s: another process took over this commit's intent "
                                "(lease expired); it finishes the commit",
                                self._intent.body.get("write_id"))
                    return
            except BaseException:  # a missed renewal; the next one may pass
                log.info("could not renew the commit lease", exc_info=True)


def plan_plain(s3: Any, where: S3Location, fmt: str,
               timing: CommitTiming | None = None, *, overwrite: bool = True) -> PlainPlan:
    """Finish abandoned commits, then record what this job's commit will check (an append's
    commit checks nothing: no marker read, no listing of a table that grows with every
    append)."""
    timing = timing or CommitTiming()
    recover_plain(s3, where, timing)
    if not overwrite:
        return PlainPlan((), None, None)
    etag, body = _read_json(s3, where, MARKER)
    blocked = None
    if body.get("state") == "committing":
        writer = str(body.get("write_id"))
        _, intent = _read_json(s3, where, intent_name(writer))
        if intent and _fresh(intent, timing):
            blocked = writer
    return PlainPlan(tuple(sorted(_data(s3, where, fmt).items())), etag, blocked)


def _fresh(intent: dict[str, Any], timing: CommitTiming) -> bool:
    lease = float(intent.get("lease_s", timing.lease_s))
    return timing.now() - float(intent.get("at", 0)) < lease


def commit_plain(
    s3: Any,
    where: S3Location,
    fmt: str,
    plan: PlainPlan,
    uploads: Sequence[PendingUpload],
    *,
    overwrite: bool,
    write_id: str,
    timing: CommitTiming | None = None,
) -> list[str]:
    """Publish ``uploads`` (and on overwrite remove the planned files); returns what it was to
    delete.

    Raises (:class:`WriteConflictError` or the store's error) only before anything became
    visible; the caller then aborts the uploads (:func:`abort_plain`). Once the first upload
    completion was attempted it returns: what it could not finish is logged, and the intent
    stays for the next writer or reader to roll forward.
    """
    timing = timing or CommitTiming()
    if overwrite and plan.blocked_by is not None:
        raise WriteConflictError(
            f"an overwrite of this table (write {plan.blocked_by}) was committing when this job "
            "planned; nothing was written, retry the job"
        )
    doomed = sorted(dict(plan.files)) if overwrite else []
    intent = _Intent(s3, where, {
        "write_id": write_id, "owner": write_id, "overwrite": overwrite,
        "state": "staged" if overwrite else "committing", "lease_s": timing.lease_s,
        "uploads": [[u.key, u.upload_id, [list(p) for p in u.parts], u.size] for u in uploads],
        "delete": doomed,
    }, None, timing)
    if not intent.write() and not _adopt(intent):
        raise WriteConflictError(f"write {write_id} already has a commit intent; nothing was "
                                 "written, retry the job")
    with _Heartbeat(intent):
        if overwrite:
            _exclusive(s3, where, fmt, plan, intent, write_id)
        _roll_forward(intent, who=write_id)
    return doomed


def _adopt(intent: _Intent) -> bool:
    """Our own first PUT landed though its answer was lost (the SDK's retry then met
    ``If-None-Match``): take the intent as ours if it is exactly what we wrote."""
    etag, body = _read_json(intent.s3, intent.where, intent_name(str(intent.body["write_id"])))
    mine = {k: v for k, v in intent.body.items() if k != "at"}
    if etag is None or {k: v for k, v in body.items() if k != "at"} != mine:
        return False
    intent.body, intent.etag = body, etag
    return True


def _ours(s3: Any, where: S3Location, write_id: str) -> bool:
    """The marker names us as committing: our PUT landed though its answer was lost."""
    _, body = _read_json(s3, where, MARKER)
    return body.get("state") == "committing" and body.get("write_id") == write_id


def _exclusive(s3: Any, where: S3Location, fmt: str, plan: PlainPlan, intent: _Intent,
               write_id: str) -> None:
    """Take the marker and check the listing (before the point of no return); on failure
    fence the intent, release the marker and raise."""
    marker = json.dumps({"write_id": write_id, "state": "committing",
                         "at": intent.timing.now()}).encode()
    held = True  # also when the PUT's answer is lost: the release checks the marker names us
    try:
        if (put_conditional(s3, where.bucket, where.key(MARKER), marker, plan.marker_etag)
                is None and not _ours(s3, where, write_id)):
            held = False
            raise WriteConflictError(
                "another overwrite of this table committed since this job planned; "
                "nothing was written, retry the job"
            )
        now, planned = _data(s3, where, fmt), dict(plan.files)
        if now != planned:
            changed = sorted(set(now.items()) ^ set(planned.items()))
            raise WriteConflictError(
                f"the table changed since this job planned ({len(changed)} data files differ, "
                f"e.g. {changed[0][0]!r}); nothing was written, retry the job"
            )
        if not intent.write(state="committing"):
            raise WriteConflictError("another writer discarded this job's commit (its lease "
                                     "ran out) since this job planned; nothing was written, "
                                     "retry the job")
    except Exception:
        _give_up(intent, release_marker=held)
        raise


def _give_up(intent: _Intent, *, release_marker: bool) -> None:
    """Before the point of no return: fence the intent as aborted and free the marker (best
    effort: a stale ``staged`` intent is discarded by whoever finds it)."""
    try:
        _retried("fencing the intent", lambda: intent.write(state="aborted"), intent.timing)
    except Exception:
        log.warning("could not mark the intent of write %s aborted", intent.body["write_id"],
                    exc_info=True)
    if release_marker:
        try:
            _retried("releasing the marker",
                     lambda: _release_marker(intent.s3, intent.where, intent.body["write_id"],
                                             intent.timing), intent.timing)
        except Exception:
            log.warning("could not release the commit marker", exc_info=True)


def _release_marker(s3: Any, where: S3Location, write_id: str, timing: CommitTiming) -> None:
    """Mark the marker "done" if it still names ``write_id`` as committing."""
    etag, body = _read_json(s3, where, MARKER)
    if etag is None or body.get("state") != "committing" or body.get("write_id") != write_id:
        return
    done = json.dumps({"write_id": write_id, "state": "done", "at": timing.now()}).encode()
    put_conditional(s3, where.bucket, where.key(MARKER), done, etag)


def _roll_forward(intent: _Intent, *, who: str) -> None:
    """The point of no return and after: every step retried, then logged, never raised.

    The first completion runs alone (it is the point of no return); the other completions, then
    the deletes, run ``timing.workers`` at a time (each idempotent, each retried on its own),
    and no delete starts before every completion was tried, as in one serial pass.
    """
    s3, where, timing = intent.s3, intent.where, intent.timing
    write_id = str(intent.body["write_id"])
    completes: list[tuple[str, Callable[[], object]]] = [
        (f"completing {up.key}", lambda up=up: _complete(s3, where, up))  # type: ignore[misc]
        for up in intent.uploads
    ]
    deletes: list[tuple[str, Callable[[], object]]] = [
        (f"deleting {rel}", lambda rel=rel: as_store(s3, where.bucket).delete(  # type: ignore[misc]
            where.key(rel))) for rel in intent.body.get("delete", [])]
    after: list[tuple[str, Callable[[], object]]] = []
    if intent.body.get("overwrite"):
        after.append(("releasing the marker",
                      lambda: _release_marker(s3, where, write_id, timing)))

    def run(step: tuple[str, Callable[[], object]]) -> bool:
        what, call = step
        try:
            _retried(what, call, timing)
            return True
        except Exception:  # committed: logged, the next writer or reader finishes it
            log.warning("write %s (finished by %s): %s failed; the next write or read of the "
                        "table finishes it", write_id, who, what, exc_info=True)
            return False

    phases = [p for p in (completes, deletes, after) if p]
    left = 0
    if phases:
        left += not run(phases[0][0])
        if who == write_id:
            timing.on_step("point_of_no_return")
        phases[0] = phases[0][1:]
    for phase in phases:
        left += _run_all(run, phase, 1 if phase is after else timing.workers)
    if left:  # the intent stays: it is the plan the next recoverer finishes
        log.warning("write %s committed with %d step(s) left to recovery", write_id, left)
        return
    try:
        _retried("removing the intent", intent.remove, timing)
    except Exception:  # the next recoverer re-runs the (idempotent) plan and removes it
        log.warning("write %s committed; its intent could not be removed", write_id,
                    exc_info=True)


def _run_all(run: Callable[[T], bool], steps: Sequence[T], workers: int) -> int:
    """Run every step (``workers`` at a time); returns how many failed. A ``BaseException``
    (an interrupt, a test's kill) propagates once the steps in flight ended."""
    if len(steps) <= 1 or workers <= 1:
        return sum(not run(step) for step in steps)
    with ThreadPoolExecutor(max_workers=min(workers, len(steps)),
                            thread_name_prefix="lakegate-commit") as pool:
        futures = [pool.submit(run, step) for step in steps]
        return sum(not future.result() for future in futures)


def _complete(s3: Any, where: S3Location, up: PendingUpload) -> None:
    """Complete one upload; already completed (by us or a recoverer) is fine."""
    as_store(s3, where.bucket).complete_staged(up)


def abort_plain(s3: Any, where: S3Location, uploads: Sequence[PendingUpload],
                write_id: str, timing: CommitTiming | None = None) -> bool:
    """Spark's abort of a plain job: abort its uploads unless its commit is in other hands.

    Never deletes an object: an upload becomes visible only by a commit's completion, which
    is past the point of no return. Returns False (touching nothing) when another process took
    the job's intent over to finish it.
    """
    timing = timing or CommitTiming()
    etag, body = _retried("reading the intent",
                          lambda: _read_json(s3, where, intent_name(write_id)), timing)
    if etag is not None and body.get("owner") != write_id:
        log.warning("write %s: its commit was taken over and is being finished; the abort "
                    "leaves it alone", write_id)
        return False
    if etag is not None:
        intent = _Intent(s3, where, body, etag, timing)
        if body.get("state") != "aborted" and not _retried(
                "fencing the intent", lambda: intent.write(state="aborted"), timing):
            return False  # taken over just now
    from lakegate_client.engine.staged import abort_uploads

    pairs = [(u.key, u.upload_id) for u in uploads]
    _retried("aborting the uploads", lambda: abort_uploads(s3, where.bucket, pairs), timing)
    if etag is not None:
        _retried("removing the intent", lambda: as_store(s3, where.bucket).delete(
            where.key(intent_name(write_id))), timing)
    return True


def recover_plain(s3: Any, where: S3Location, timing: CommitTiming | None = None) -> int:
    """Finish or discard every commit whose owner's lease expired; returns how many.

    Exactly one recoverer takes an intent (a PUT conditional on its ETag); a ``committing``
    one is rolled forward, a ``staged`` or ``aborted`` one discarded (its uploads aborted).
    """
    timing = timing or CommitTiming()
    me = f"recovery-{uuid.uuid4().hex[:12]}"
    done = 0
    for rel in sorted(list_objects(s3, where, INTENT_PREFIX)):
        etag, body = _read_json(s3, where, rel)
        if etag is None or not body.get("write_id") or _fresh(body, timing):
            continue
        intent = _Intent(s3, where, body, etag, timing)
        if not intent.write(owner=me):
            continue  # another recoverer (or the owner) got there first
        log.warning("write %s: its owner's lease expired with the commit %s; %s", body["write_id"],
                    body.get("state"), "rolling it forward" if body.get("state") == "committing"
                    else "discarding it")
        with _Heartbeat(intent):
            if body.get("state") == "committing":
                _roll_forward(intent, who=me)
            else:
                _discard(intent)
        done += 1
    return done


def pending_intents(s3: Any, where: S3Location) -> list[str]:
    """The table's commit intents (cheap: one listing under the intent prefix)."""
    return sorted(list_objects(s3, where, INTENT_PREFIX))


def finish_abandoned(read_s3: Any, where: S3Location, write_s3: Callable[[], Any],
                     timing: CommitTiming | None = None) -> int:
    """A reader's part in recovery: find (with its read credential) an intent whose lease
    expired, and only then get a write client (``write_s3``) and finish it. Returns how many
    commits it finished."""
    timing = timing or CommitTiming()
    for rel in pending_intents(read_s3, where):
        etag, body = _read_json(read_s3, where, rel)
        if etag is not None and body.get("write_id") and not _fresh(body, timing):
            return recover_plain(write_s3(), where, timing)
    return 0


def _discard(intent: _Intent) -> None:
    from lakegate_client.engine.staged import abort_uploads

    s3, where = intent.s3, intent.where
    try:
        abort_uploads(s3, where.bucket, [(u.key, u.upload_id) for u in intent.uploads])
        if intent.body.get("overwrite"):
            _release_marker(s3, where, str(intent.body["write_id"]), intent.timing)
        intent.remove()
    except Exception:
        log.warning("could not discard the abandoned intent of write %s",
                    intent.body["write_id"], exc_info=True)


def delete_job_files(s3: Any, where: S3Location, relative: Sequence[str]) -> None:
    """Delete objects under the table (already gone is fine)."""
    store = as_store(s3, where.bucket)
    for rel in relative:
        store.delete(where.key(rel))


def publish_plain(creds: TableCredentials, fmt: str, plan: PlainPlan,
                  uploads: Sequence[PendingUpload], *, overwrite: bool, write_id: str,
                  timing: CommitTiming | None = None) -> None:
    """Complete a plain job's uploads under the commit protocol (``engine/formats/plain.py``).

    ``commit_plain`` raises only before the point of no return; then the uploads are aborted
    (unless another process took the commit over to finish it). The sweep never aborts an
    upload of the plan: a step left to recovery may still need it.
    """
    s3, where = stores.table_store(creds), S3Location.parse(creds.location)
    try:
        commit_plain(s3, where, fmt, plan, uploads, overwrite=overwrite, write_id=write_id,
                     timing=timing)
    except BaseException:
        abort_plain_job(s3, where, uploads, write_id)
        raise
    keep = [u.upload_id for u in uploads]
    retrying.after_commit("the upload sweep", write_id,
                          lambda: staged.sweep(s3, where, write_id, keep))


def abort_plain_job(s3: Any, where: S3Location, uploads: Sequence[PendingUpload],
                    write_id: str) -> None:
    """A plain job's abort: never deletes an object, only aborts what its commit did not take
    past the point of no return (``abort_plain``), then sweeps its other pending uploads."""
    if abort_plain(s3, where, uploads, write_id):
        staged.sweep(s3, where, write_id)


def finish_abandoned_plain(creds: TableCredentials,
                           write_creds: Callable[[], TableCredentials]) -> int:
    """A reader planning a plain table on S3 first finishes commits whose driver died
    (``recover_plain``), so a crashed job never leaves it torn once someone reads it.

    Best effort (logged): listing the intents needs only the read credential; a recovery needs
    a write one, which a read-only caller may not get. Returns how many commits it finished.
    """
    if not stores.stages(creds):
        return 0
    try:
        return finish_abandoned(stores.table_store(creds), S3Location.parse(creds.location),
                                lambda: stores.table_store(write_creds()))
    except Exception:  # the read goes on with the table as it is
        log.warning("could not finish an abandoned commit of %s", creds.location, exc_info=True)
        return 0


class PlainProtocol:
    """:class:`~lakegate_client.engine.protocol.CommitProtocol` of plain tables (``parquet``,
    ``csv``, ``json``): the marker and intent above on S3, ADLS and GCS; elsewhere (no
    conditional writes) tasks write visible files and the commit removes the replaced ones."""

    def plan(self, creds: TableCredentials, job: Job, store: ObjectStore | None) -> Job:
        if store is None or not job.staged:
            return job
        where = S3Location.parse(creds.location)
        return dataclasses.replace(job, plain=plan_plain(store, where, job.fmt,
                                                         overwrite=job.overwrite))

    def commit(self, creds: TableCredentials, job: Job, schema: pa.Schema, reported: Reported,
               timing: object | None = None) -> None:
        if isinstance(job.plain, PlainPlan):
            publish_plain(creds, job.fmt, job.plain, reported.uploads, overwrite=job.overwrite,
                          write_id=job.write_id,
                          timing=timing if isinstance(timing, CommitTiming) else None)
            return
        replace_files(creds.pyarrow_filesystem(), fs_path(creds.location), job.fmt,
                      [f.path for f in reported.files], overwrite=job.overwrite,
                      write_id=job.write_id)

    def abort(self, creds: TableCredentials, job: Job, reported: Reported) -> None:
        if job.staged:
            s3, where = stores.table_store(creds), S3Location.parse(creds.location)
            if isinstance(job.plain, PlainPlan):  # a visible file is a committed one: kept
                abort_plain_job(s3, where, reported.uploads, job.write_id)
                return
            staged.discard_staged(s3, where, reported.uploads, job.write_id)
        job_files.drop_job_files(creds, job.write_id, keep=())

    def recover(self, creds: TableCredentials, timing: JobTiming | None = None) -> int:
        """Roll forward or discard every abandoned plain commit (its own timing:
        :class:`CommitTiming`; ``timing`` is the job intents' and unused here)."""
        if not stores.stages(creds):
            return 0
        try:
            return recover_plain(stores.table_store(creds), S3Location.parse(creds.location))
        except Exception:  # the write goes on; the next write or read retries
            log.warning("could not recover abandoned commits of %s", creds.location,
                        exc_info=True)
            return 0

    def finish_abandoned(self, creds: TableCredentials,
                         write_creds: Callable[[], TableCredentials]) -> int:
        return finish_abandoned_plain(creds, write_creds)


PLAIN = PlainProtocol()
