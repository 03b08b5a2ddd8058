"""The intent of a Delta, Iceberg or Lance write job on S3, ADLS or GCS: a leased claim that
lets the next writer or reader remove the files of a job whose driver died before its commit.

Why: tasks land data files (Lance fragments, or uploads the commit completes) before the one
log or catalog commit call that makes them part of the table. A driver killed before or during
that call leaves files nothing references and nobody knows of. So the driver writes, before any
task writes a file, ``_lakegate_job-<write id>.json`` (a create only if absent; hidden from every
reader): its write id, format, planned version and, once it commits, the uploads and files it
publishes. Every call goes through the table's
:class:`~lakegate_client.engine.stores.base.ObjectStore` (or a boto3 S3 client, wrapped as an
``S3Store``): S3's ``If-None-Match: *`` / ``If-Match``, ADLS's the same headers on Put Blob, GCS's
``ifGenerationMatch=0`` / ``=<generation>`` (its "ETag" is the generation).

- **Lease.** The intent's ``at`` is renewed while the job lives: by the planning process, by
  every task while it writes, by the commit while it runs. A renewal reads the intent and PUTs it
  back conditional on the ETag it read, only while it still names the job as ``owner``:
  renewals of one job may race each other (the loser sees a fresh lease and is done), never a
  takeover.
- **The fence** (:meth:`JobIntent.fence`): before each commit call (the point of no return) the
  driver moves the intent to ``committing``, with the same read-check-PUT, or, from the intent
  as planning wrote it (:class:`Seen`), with one PUT conditional on that ETag (refused when
  anything wrote the intent since: then read-check-PUT). If another process
  took the job over (its lease had expired), the fence fails and the job fails with nothing
  visible: the commit call is never made. A lease that expired without a takeover does not
  refuse the commit: a recoverer must win a PUT conditional on the ETag the fence replaces, so
  of the two exactly one proceeds, and refusing would fail a healthy job for a gap in its
  heartbeat.
- **Recovery** (:func:`recover_jobs`): the next write's planning or read finds an intent whose
  lease expired, takes it over (``owner`` = itself, a PUT conditional on the ETag it read, so
  exactly one recoverer wins and the owner's next renewal or fence fails), then:
  ``staged`` (the owner never fenced, so it never committed and now never will): deletes the
  job's files, then the intent; ``committing``: once the lease plus :data:`COMMIT_BOUND_S` ran
  out (the owner's last commit call has ended), reads the table for the write id: there, it
  rolls the job forward (the cleanup its driver did not live to make: unused attempts' files,
  uploads never completed), then removes the intent; absent, it deletes the job's files, then
  the intent; unreadable, it leaves the intent for a later recoverer.
- **Only a job with landed files is recovered while ``staged``.** Spark reaps an idle Python
  worker after a minute, so the planning process's heartbeat may end long before the write
  tasks start (upstream stages run after planning). A ``staged`` job with nothing landed (Delta
  on S3 and ADLS and Iceberg on S3 stage invisible uploads; a Lance job whose attempt ledger is
  empty) is left alone until :data:`STALE_STAGED_S`, so a long job is not failed for a gap in
  its heartbeat.

What stays open (README): leases compare the hosts' wall clocks, and a process stalled longer
than the lease plus :data:`COMMIT_BOUND_S` inside a commit call (a frozen VM, a request held
that long by a proxy) could land its commit after a recoverer deleted its files.
"""

from __future__ import annotations

import itertools
import json
import logging
import os
import threading
import time
import uuid
import weakref
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Protocol

from lakegate_client.engine.retrying import retried
from lakegate_client.engine.stores import as_store
from lakegate_client.engine.stores.base import ObjectStore, S3Location

__all__ = [
    "COMMIT_BOUND_S",
    "JOB_PREFIX",
    "JobFencedError",
    "JobIntent",
    "JobTiming",
    "LeaseKeeper",
    "Resolver",
    "Seen",
    "job_intents",
    "recover_jobs",
]

JOB_PREFIX = "_lakegate_job-"
LEASE_S = 60.0
# The longest a commit call started after a successful fence may still land: delta-rs and
# Lance retry a store request for up to 3 minutes, and the gateway answers a catalog commit
# within its upstream timeout. Recovery of a ``committing`` intent waits this beyond the lease.
COMMIT_BOUND_S = 600.0
STALE_STAGED_S = 86_400.0  # a staged intent with nothing landed is debris after a day
BACKOFF_S = 0.2  # times the attempt number
RETRIES = 4
CONFLICT_RETRIES = 20  # renewals of one job racing each other (tasks, the driver)
log = logging.getLogger(__name__)


class JobFencedError(RuntimeError):
    """The job's lease expired and another process took it over: it must not commit."""


@dataclass(frozen=True)
class JobTiming:
    """Clock and lease of the protocol (injected: tests fake them)."""

    now: Callable[[], float] = time.time
    sleep: Callable[[float], None] = time.sleep
    lease_s: float = LEASE_S
    commit_bound_s: float = COMMIT_BOUND_S
    stale_staged_s: float = STALE_STAGED_S
    retries: int = RETRIES


@dataclass(frozen=True)
class Seen:
    """The intent as its job last wrote it (ETag, JSON body): the fence can then replace it
    with one conditional PUT, without reading it first (issue 36), while nothing else wrote it
    (a renewal, a takeover: the PUT is refused, and the fence reads as usual)."""

    etag: str
    body: str


def intent_name(write_id: str) -> str:
    return f"{JOB_PREFIX}{write_id}.json"


def _read(store: ObjectStore, where: S3Location, rel: str) -> tuple[str | None, dict[str, Any]]:
    found = store.get(where.key(rel))
    if found is None:
        return None, {}
    body = json.loads(found[0] or b"{}")
    return found[1], body if isinstance(body, dict) else {}


def _retried(what: str, step: Callable[[], Any], timing: JobTiming) -> Any:
    return retried(what, step, retries=timing.retries, backoff_s=BACKOFF_S, sleep=timing.sleep)


@dataclass
class JobIntent:
    """One job's intent object, as seen by any process of that job (picklable fields only
    besides the store: rebuilt in each process from its own credential). ``s3``: the table's
    :class:`ObjectStore`, or a boto3 S3 client."""

    s3: Any
    where: S3Location
    write_id: str
    timing: JobTiming = field(default_factory=JobTiming)

    @property
    def name(self) -> str:
        return intent_name(self.write_id)

    @property
    def store(self) -> ObjectStore:
        return as_store(self.s3, self.where.bucket)

    def mark_unknown(self) -> bool:
        """The commit call's outcome could not be read: record ``unknown`` on the
        ``committing`` intent, so that no abort deletes the job's files on one read (it may lag,
        or the call may still land); the recovery decides from the table once the lease and
        the commit bound ran out. Returns whether the intent now says so."""
        return bool(_retried("marking the job intent unknown",
                             lambda: self._update(("committing",), unknown=True), self.timing))

    def outcome_unknown(self) -> bool:
        """Whether the intent is ``committing`` with an unknown outcome (:meth:`mark_unknown`);
        one read, retried (raises when the store cannot answer)."""
        def read() -> bool:
            etag, body = _read(self.store, self.where, self.name)
            return etag is not None and body.get("state") == "committing" \
                and bool(body.get("unknown"))
        return bool(_retried("reading the job intent", read, self.timing))

    def create(self, fmt: str, **facts: Any) -> Seen:
        """Planning: claim the job (a create only if absent) before any task writes a file;
        returns the intent as written, for the fence."""
        body = {"write_id": self.write_id, "owner": self.write_id, "format": fmt,
                "state": "staged", "lease_s": self.timing.lease_s, **facts}

        def put() -> Seen:
            text = json.dumps({**body, "at": self.timing.now()})
            etag = self.store.put_if(self.where.key(self.name), text.encode(), None)
            if etag is not None:
                return Seen(etag, text)
            # refused: another job's intent, or this create's own earlier attempt that landed
            found, current = _read(self.store, self.where, self.name)
            if found is None or current.get("owner") != self.write_id:
                raise JobFencedError(f"write {self.write_id} already has a job intent")
            return Seen(found, json.dumps(current))
        return _retried("writing the job intent", put, self.timing)  # type: ignore[no-any-return]

    def _update(self, states: tuple[str, ...], fresh_s: float | None = None,
                seen: Seen | None = None, **changes: Any) -> bool:
        """Read the intent and PUT it back (conditional on its ETag) with ``changes`` and a
        fresh lease, while it names this job as owner in one of ``states``; False when it does
        not (gone, taken over, or past these states). ``fresh_s`` (a plain renewal): renewed
        less than that ago (by a sibling task, whose PUT may just have beaten this one) is
        renewed enough, so many tasks renewing at once do not fight over the ETag. ``seen``:
        first a PUT conditional on that ETag, without the read (refused: read as usual)."""
        if seen is not None:
            body = json.loads(seen.body)
            if body.get("owner") == self.write_id and body.get("state") in states:
                new = {**body, **changes, "at": self.timing.now()}
                if self.store.put_if(self.where.key(self.name), json.dumps(new).encode(),
                                     seen.etag) is not None:
                    return True
        for _ in range(CONFLICT_RETRIES):
            etag, body = _read(self.store, self.where, self.name)
            if etag is None or body.get("owner") != self.write_id \
                    or body.get("state") not in states:
                return False
            if fresh_s is not None and self.timing.now() - float(body.get("at", 0)) < fresh_s:
                return True
            new = {**body, **changes, "at": self.timing.now()}
            if self.store.put_if(self.where.key(self.name), json.dumps(new).encode(),
                                 etag) is not None:
                return True
        return False  # renewals kept racing: a renewal tries again; a fence fails the job

    def renew(self) -> bool:
        """Extend the lease of a job that has not fenced yet (planning, tasks); False once the
        job is gone, fenced or taken over."""
        return bool(_retried("renewing the job lease", self.renew_once, self.timing))

    def fence(self, seen: Seen | None = None, **record: Any) -> None:
        """The last step before a commit call: the intent becomes ``committing`` (with what the
        commit publishes, for a recoverer) and the lease fresh; ``seen``: the intent as
        planning wrote it (:meth:`create`), so that, unchanged since, one PUT fences it. Raises
        :class:`JobFencedError` when the job was taken over: it must not commit."""
        tries = iter([seen])

        def update() -> bool:  # the fast PUT once: a retry after an error reads first
            return self._update(("staged", "committing"), seen=next(tries, None),
                                state="committing", **record)
        if not _retried("fencing the job intent", update, self.timing):
            raise JobFencedError(
                f"write {self.write_id}: the job's lease expired and another process took it "
                "over (and removes its files), or its intent could not be fenced; nothing was "
                "committed, retry the job")

    def renew_once(self) -> bool:
        """One renewal of a ``staged`` job (no retry of an error)."""
        return self._update(("staged",), fresh_s=self.timing.lease_s / 8)

    def keep_committing(self) -> bool:
        """Renew the lease of a ``committing`` job (the commit's heartbeat)."""
        return self._update(("committing",))

    def remove(self, settled: bool = False) -> None:
        """The job ended (committed, or its files are gone): delete the intent, if still ours
        (a recoverer's stays). Retried; a failure is logged (the next recoverer removes it).

        ``settled``: the job's own cleanup is complete (a Lance commit's or abort's ledger
        cleanup succeeded), so the intent goes without reading its owner first (one GET
        fewer, issue 36). Safe: a recoverer that took the job over meanwhile (its clock ran
        the lease out) only repeats what is done already, and an intent removed under it
        costs nothing: every record its sweep could then take names files no commit uses.
        """
        def step() -> None:
            if not settled:
                _, body = _read(self.store, self.where, self.name)
                if body.get("owner") != self.write_id:
                    return
            self.store.delete(self.where.key(self.name))
        try:
            _retried("removing the job intent", step, self.timing)
        except Exception:
            log.warning("write %s ended; its job intent could not be removed (the next write "
                        "or read removes it)", self.write_id, exc_info=True)


class AliveJobs:
    """The jobs whose lease this process renewed, or had its keeper renew at once, in the last
    ``lease_s / 30`` seconds of its monotonic clock (2 s for the default lease).

    Why: Spark reuses a Python worker for task after task, and each Lance task's hold renews
    its job's lease at once (a GET of the intent, a PUT when it is older than an eighth of the
    lease): one that this very process asked for a moment ago need not be asked again (issue
    36). Bounded: the oldest entries go past ``size``.
    """

    def __init__(self, clock: Callable[[], float] = time.monotonic, size: int = 256) -> None:
        self._clock = clock
        self._size = size
        self._seen: dict[tuple[str, str], float] = {}

    def confirmed(self, intent: JobIntent) -> bool:
        """Whether this process renewed ``intent``'s lease recently enough to skip a renewal."""
        at = self._seen.get(self._key(intent))
        return at is not None and self._clock() - at < intent.timing.lease_s / 30

    def note(self, intent: JobIntent) -> None:
        """``intent``'s lease was just renewed (or its renewal asked for)."""
        key = self._key(intent)
        self._seen.pop(key, None)
        self._seen[key] = self._clock()
        while len(self._seen) > self._size:
            del self._seen[next(iter(self._seen))]

    @staticmethod
    def _key(intent: JobIntent) -> tuple[str, str]:
        return intent.where.bucket, intent.where.key(intent.name)


class LeaseKeeper:
    """Renews the leases this process holds (planning, tasks, the commit) from one daemon
    thread, each every quarter lease, until it is released, or its job ended, fenced (a
    ``staged`` hold) or was taken over.

    Why one thread: a Lance task held its job's lease with a thread of its own, and starting
    a thread waits until the new thread runs: 1-9 ms of a 40 ms task on a busy 2-core node,
    for a renewal first due after 15 s (issue 36). The keeper's thread starts with the first
    hold of the process (again in a forked child, where threads do not survive).

    A renewal already under way when its hold is released may still land: harmless, as every
    renewal is a PUT conditional on the ETag it read, so it can neither resurrect a removed
    intent nor undo a takeover.
    """

    IDLE_WAIT_S = 60.0  # an idle keeper still wakes now and then (every wait has a timeout)

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._tokens = itertools.count(1)
        self._reset()
        os.register_at_fork(after_in_child=partial(_reset_in_child, weakref.ref(self)))

    def _reset(self) -> None:
        self._cond = threading.Condition()
        self._held: dict[int, tuple[JobIntent, bool, float]] = {}  # intent, committing, due
        self._thread: threading.Thread | None = None

    @contextmanager
    def hold(self, intent: JobIntent, *, committing: bool = False,
             at_once: bool = False) -> Iterator[None]:
        """Renew ``intent``'s lease while the body runs (``committing``: the commit's
        heartbeat, :meth:`JobIntent.keep_committing`; ``at_once``: the first renewal now, not
        a period from now)."""
        token = self.keep(intent, committing=committing, at_once=at_once)
        try:
            yield
        finally:
            self.release(token)

    def keep(self, intent: JobIntent, *, committing: bool = False,
             at_once: bool = False) -> int:
        """Renew ``intent``'s lease until :meth:`release` of the returned token, or until its
        job ends, fences or is taken over."""
        with self._cond:
            token = next(self._tokens)
            first = self._clock() + (0.0 if at_once else self._period(intent))
            self._held[token] = (intent, committing, first)
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._run, daemon=True,
                                                name="lakegate-lease-keeper")
                self._thread.start()
            self._cond.notify()
        return token

    def release(self, token: int) -> None:
        with self._cond:
            self._held.pop(token, None)

    def holding(self) -> int:
        """How many leases are held (for tests and a debugger)."""
        with self._cond:
            return len(self._held)

    @staticmethod
    def _period(intent: JobIntent) -> float:
        return max(intent.timing.lease_s / 4, 0.01)

    def _due(self) -> list[tuple[int, JobIntent, bool]]:
        """Under the lock: the holds due now (their next turn scheduled), else wait for the
        next one (or a new hold)."""
        now = self._clock()
        due = [(t, i, c) for t, (i, c, at) in self._held.items() if at <= now]
        for token, intent, committing in due:
            self._held[token] = (intent, committing, now + self._period(intent))
        if not due:
            soonest = min((at for _, _, at in self._held.values()), default=now + self.IDLE_WAIT_S)
            self._cond.wait(timeout=min(max(soonest - now, 0.0), self.IDLE_WAIT_S))
        return due

    def _run(self) -> None:
        while True:
            with self._cond:
                due = self._due()
            for token, intent, committing in due:
                try:
                    alive = intent.keep_committing() if committing else intent.renew_once()
                except Exception:  # a missed renewal; the next one may pass
                    log.info("could not renew the lease of write %s", intent.write_id,
                             exc_info=True)
                    continue
                except BaseException:  # noqa: BLE001 - the process is going away: so do its leases
                    return
                if not alive:  # the job ended, fenced, or was taken over
                    self.release(token)


def _reset_in_child(keeper: weakref.ref[LeaseKeeper]) -> None:
    """A forked child has none of its parent's threads, and maybe a lock held by one."""
    found = keeper()
    if found is not None:
        found._reset()


class Resolver(Protocol):
    """What recovery needs from a format: whether a write id committed, how to delete an
    uncommitted job's files, and how to finish a committed one's cleanup (never a file the
    table references)."""

    def landed(self, intent: dict[str, Any]) -> bool:
        """Whether a ``staged`` job may have visible files (False: nothing to clean yet)."""

    def committed(self, intent: dict[str, Any]) -> bool | None:
        """Whether the table holds the job's commit (None: the table cannot be read)."""

    def discard(self, intent: dict[str, Any]) -> None:
        """Delete the files of a job that did not commit and never will (idempotent)."""

    def settle(self, intent: dict[str, Any]) -> None:
        """Finish a job whose commit landed: remove what it left that the table does not
        reference (a staged upload never completed, an unused attempt's files), never a
        file the commit published (idempotent)."""


def job_intents(s3: Any, where: S3Location) -> list[str]:
    """The table's job intents (one listing under the intent prefix; ``s3``: an
    :class:`ObjectStore` or a boto3 S3 client)."""
    return sorted(where.relative(key) for key in as_store(s3, where.bucket).list(
        where.key(JOB_PREFIX)))


def expired(body: dict[str, Any], timing: JobTiming) -> bool:
    """Whether the owner can no longer commit once taken over: a ``staged`` job's lease ran
    out; a ``committing`` one's lease and :data:`COMMIT_BOUND_S` (its commit call ended)."""
    lease = float(body.get("lease_s", timing.lease_s))
    if body.get("state") == "committing":
        lease += timing.commit_bound_s
    return timing.now() - float(body.get("at", 0)) >= lease


def _due(body: dict[str, Any], resolver: Resolver, timing: JobTiming) -> bool:
    """Whether recovery takes this intent over now."""
    if not body.get("write_id") or not expired(body, timing):
        return False
    if body.get("state") != "staged":
        return True
    return (timing.now() - float(body.get("at", 0)) >= timing.stale_staged_s
            or resolver.landed(body))


def abandoned(s3: Any, where: S3Location, resolver: Resolver,
              timing: JobTiming | None = None) -> bool:
    """Whether the table has a job intent to recover now (read access suffices)."""
    timing = timing or JobTiming()
    store = as_store(s3, where.bucket)
    for rel in job_intents(store, where):
        etag, body = _read(store, where, rel)
        if etag is not None and _due(body, resolver, timing):
            return True
    return False


def recover_jobs(s3: Any, where: S3Location, resolver: Resolver,
                 timing: JobTiming | None = None) -> int:
    """Take over every expired job intent and finish it: remove it when its write committed,
    else delete the job's files, then it. Returns how many jobs it finished; a job it could not
    finish (the table unreadable, a delete failing) is logged and left to the next recoverer."""
    timing = timing or JobTiming()
    store = as_store(s3, where.bucket)
    me = f"recovery-{uuid.uuid4().hex[:12]}"
    done = 0
    for rel in job_intents(store, where):
        etag, body = _read(store, where, rel)
        if etag is None or not _due(body, resolver, timing):
            continue
        taken = {**body, "owner": me, "at": timing.now()}
        new_etag = store.put_if(where.key(rel), json.dumps(taken).encode(), etag)
        if new_etag is None:
            continue  # another recoverer (or the owner's fence) got there first
        write_id = str(body["write_id"])
        try:
            state = resolver.committed(body) if body.get("state") == "committing" else False
            if state is None:
                log.warning("write %s: its driver died while committing and the table cannot "
                            "show whether the commit landed; its files stay for a later "
                            "recovery", write_id)
                continue
            if not state:
                log.warning("write %s: its driver died before its commit landed; deleting its "
                            "unreferenced files", write_id)
                _retried("deleting the files of an abandoned job",
                         lambda body=body: resolver.discard(body), timing)  # type: ignore[misc]
            else:  # roll forward: the cleanup its driver did not live to make
                _retried("finishing the cleanup of a committed job",
                         lambda body=body: resolver.settle(body), timing)  # type: ignore[misc]
            _retried("removing an abandoned job intent",
                     lambda rel=rel: store.delete(where.key(rel)), timing)  # type: ignore[misc]
            done += 1
        except Exception:
            log.warning("could not finish the abandoned write %s (the next write or read "
                        "retries)", write_id, exc_info=True)
    return done
