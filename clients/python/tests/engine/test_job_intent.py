"""The job intent of Delta, Iceberg and Lance writes (``engine/job_intent.py``): a lease the
job's processes renew, a fence before the commit call, and a recovery that takes an expired job
over and removes its files only when its write id is proven absent. Every test runs on each
store the intent lives on: the fake S3 (through a boto3-like client), the fake ADLS (Azure's
409/412 refusals, an ETag that changes on every write) and the in-memory GCS behind the real
``GcsStore`` (generation preconditions)."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

from lakegate_client.engine.job_intent import (
    AliveJobs,
    JobFencedError,
    JobIntent,
    JobTiming,
    LeaseKeeper,
    Seen,
    abandoned,
    intent_name,
    recover_jobs,
)
from lakegate_client.engine.stores.base import S3Location

from .stores.fake_adls import FakeAdls
from .stores.fake_gcs import FakeGcs
from .stores.fake_s3 import FakeS3, Fault

WHERE = S3Location("b", "wh/t")
Store = FakeS3 | FakeAdls | FakeGcs
STORES = {"s3": FakeS3, "adls": FakeAdls, "gcs": FakeGcs}
# what a renewal calls on each store: read the intent, PUT it back conditionally, read again
RENEWAL_OPS = {"s3": ["GetObject", "PutObject", "GetObject"],
               "adls": ["GetBlob", "PutBlob", "GetBlob"],
               "gcs": ["Get", "Upload", "Get"]}


@pytest.fixture(params=sorted(STORES))
def kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def s3(kind: str) -> Store:
    """The store the intent lives on (named ``s3`` as in the code: a store or an S3 client)."""
    return STORES[kind]()


class Clock:
    def __init__(self) -> None:
        self.t = 1_000.0

    def __call__(self) -> float:
        return self.t


class Table:
    """A format's view for recovery: which files the job left, whether its commit landed."""

    def __init__(self, files: set[str], committed: bool | None = False,
                 landed: bool = True) -> None:
        self.files, self.state, self.has_landed = files, committed, landed
        self.discarded: list[str] = []
        self.settled: list[str] = []

    def landed(self, intent: dict[str, Any]) -> bool:
        return self.has_landed

    def committed(self, intent: dict[str, Any]) -> bool | None:
        return self.state

    def discard(self, intent: dict[str, Any]) -> None:
        self.discarded.append(str(intent["write_id"]))
        self.files.clear()

    def settle(self, intent: dict[str, Any]) -> None:
        self.settled.append(str(intent["write_id"]))


def _timing(clock: Clock) -> JobTiming:
    return JobTiming(now=clock, sleep=lambda _s: None, lease_s=60.0, commit_bound_s=600.0,
                     stale_staged_s=86_400.0)


def _intent(s3: Store, clock: Clock, write_id: str = "w1") -> JobIntent:
    return JobIntent(s3, WHERE, write_id, _timing(clock))


def _body(s3: Store, write_id: str = "w1") -> dict[str, Any]:
    return dict(json.loads(s3.objects[WHERE.key(intent_name(write_id))]))


def test_a_job_killed_before_its_commit_loses_its_files_to_the_next_recovery(s3: Store) -> None:
    clock = Clock()
    _intent(s3, clock).create("lance", staged=False)
    table = Table({"data/a.lance"})
    assert recover_jobs(s3.view(), WHERE, table, _timing(clock)) == 0  # the lease is alive
    clock.t += 61
    assert abandoned(s3.view(), WHERE, table, _timing(clock))
    assert recover_jobs(s3.view(), WHERE, table, _timing(clock)) == 1
    assert table.files == set()
    assert table.discarded == ["w1"]
    assert s3.objects == {}


def test_a_stale_owner_cannot_commit_after_a_takeover(s3: Store) -> None:
    """The owner stalled past its lease; a recoverer took the job over and removed its files.
    The owner's fence then fails, so its commit call is never made."""
    clock = Clock()
    owner = _intent(s3, clock)
    owner.create("delta", staged=False)
    clock.t += 61
    taken = {"write_id": "w1"}

    class Holding(Table):
        def discard(self, intent: dict[str, Any]) -> None:  # the owner wakes up meanwhile
            with pytest.raises(JobFencedError, match="took it over"):
                owner.fence(files=["part-w1-0.parquet"])
            assert not owner.renew()
            super().discard(intent)

    table = Holding({"part-w1-0.parquet"})
    assert recover_jobs(s3.view(), WHERE, table, _timing(clock)) == 1
    assert table.discarded == [taken["write_id"]]
    with pytest.raises(JobFencedError):  # and after the recovery ended
        owner.fence()


def _ops(s3: Store, since: int) -> list[str]:
    return [op for op, _key in s3.calls[since:]]


def test_the_fence_from_what_planning_wrote_is_one_conditional_put(s3: Store, kind: str) -> None:
    """Issue 36: the fence read the intent back (a GET before every commit call) although the
    driver's own planning wrote it moments ago. From planning's ``Seen`` it is one PUT
    conditional on that ETag, with the same body a read would have given."""
    clock = Clock()
    seen = _intent(s3, clock).create("lance", staged=False)
    assert isinstance(seen, Seen)
    assert json.loads(seen.body) == _body(s3)
    before = len(s3.calls)
    clock.t += 5
    _intent(s3, clock).fence(seen, files=["data/a.lance"], read_version=7)
    assert _ops(s3, before) == [RENEWAL_OPS[kind][1]]
    assert _body(s3) == {**json.loads(seen.body), "state": "committing", "at": 1_005.0,
                         "files": ["data/a.lance"], "read_version": 7}


def test_a_fence_whose_intent_moved_since_planning_reads_it_and_a_takeover_still_fences(
        s3: Store) -> None:
    """A renewal changed the ETag: the conditional PUT is refused and the fence reads, as
    before. A recoverer took the job over: refused too, and the read shows the takeover."""
    clock = Clock()
    seen = _intent(s3, clock).create("lance", staged=False)
    clock.t += 10
    assert _intent(s3, clock).renew()
    _intent(s3, clock).fence(seen, files=["data/a.lance"])
    assert _body(s3)["state"] == "committing"
    assert _body(s3)["files"] == ["data/a.lance"]
    other = type(s3)()
    seen = _intent(other, clock, "w2").create("delta", staged=False)
    clock.t += 61
    assert recover_jobs(other.view(), WHERE, Table(set(), landed=True), _timing(clock)) == 1
    with pytest.raises(JobFencedError, match="took it over"):
        _intent(other, clock, "w2").fence(seen)


def test_a_create_whose_answer_was_lost_returns_the_intent_it_wrote(s3: Store, kind: str) -> None:
    """A retried create finds its own intent (the first PUT landed, its answer was lost) and
    returns that intent as stored, so the fence's conditional PUT matches it."""
    clock = Clock()
    s3.faults = {1: Fault(after=True)}
    seen = _intent(s3, clock).create("lance", staged=False)
    assert json.loads(seen.body) == _body(s3)
    before = len(s3.calls)
    _intent(s3, clock).fence(seen)
    assert _ops(s3, before) == [RENEWAL_OPS[kind][1]]


def test_a_settled_job_removes_its_intent_without_reading_it(s3: Store) -> None:
    """Issue 36: a job whose own cleanup is complete deletes its intent in one call; a job
    that did not say so reads it first and leaves a recoverer's alone."""
    clock = Clock()
    _intent(s3, clock).create("lance", staged=False)
    before = len(s3.calls)
    _intent(s3, clock).remove(settled=True)
    assert len(s3.calls) - before == 1
    assert s3.objects == {}
    _intent(s3, clock).create("lance", staged=False)
    clock.t += 61
    table = Table({"data/a.lance"})

    class Interrupted(Table):
        def discard(self, intent: dict[str, Any]) -> None:
            _intent(s3, clock).remove()  # the owner's unsettled removal: not its intent now
            assert s3.objects
            super().discard(intent)
    assert recover_jobs(s3.view(), WHERE, Interrupted(table.files), _timing(clock)) == 1


def test_a_committing_job_is_left_alone_until_its_commit_call_can_no_longer_land(s3: Store) -> None:
    clock = Clock()
    owner = _intent(s3, clock)
    owner.create("iceberg", staged=True)
    owner.fence(files=["data/w1-a.parquet"])
    assert _body(s3)["state"] == "committing"
    table = Table({"data/w1-a.parquet"})
    clock.t += 60 + 599  # the lease ran out, but a commit call may still be in flight
    assert recover_jobs(s3.view(), WHERE, table, _timing(clock)) == 0
    assert table.files
    clock.t += 2
    assert recover_jobs(s3.view(), WHERE, table, _timing(clock)) == 1
    assert table.files == set()
    assert s3.objects == {}


def test_a_committed_job_keeps_its_files_and_an_unreadable_table_keeps_the_intent(
        s3: Store) -> None:
    clock = Clock()
    for write_id in ("w1", "w2"):
        owner = _intent(s3, clock, write_id)
        owner.create("delta", staged=False)
        owner.fence()
    clock.t += 10_000
    committed = Table({"part-w1-0.parquet"}, committed=True)
    unknown = Table({"part-w2-0.parquet"}, committed=None)

    class Both(Table):
        def committed(self, intent: dict[str, Any]) -> bool | None:
            return (committed if intent["write_id"] == "w1" else unknown).state

        def discard(self, intent: dict[str, Any]) -> None:
            raise AssertionError("no file of a committed or undecided job is deleted")

    both = Both(set())
    assert recover_jobs(s3.view(), WHERE, both, _timing(clock)) == 1
    assert list(s3.objects) == [WHERE.key(intent_name("w2"))]  # w1's intent is gone
    assert _body(s3, "w2")["owner"].startswith("recovery-")  # left for a later recovery
    assert both.settled == ["w1"]  # rolled forward: the cleanup its driver did not make


def test_a_committed_job_whose_cleanup_fails_keeps_its_intent_for_the_next_recovery(
        s3: Store) -> None:
    clock = Clock()
    owner = _intent(s3, clock)
    owner.create("lance", staged=False)
    owner.fence(files=["data/a.lance"])
    clock.t += 10_000

    class Failing(Table):
        def settle(self, intent: dict[str, Any]) -> None:
            raise OSError("503 SlowDown")

    assert recover_jobs(s3.view(), WHERE, Failing(set(), committed=True), _timing(clock)) == 0
    assert _body(s3)["owner"].startswith("recovery-")
    clock.t += 10_000
    table = Table(set(), committed=True)
    assert recover_jobs(s3.view(), WHERE, table, _timing(clock)) == 1
    assert table.settled == ["w1"]
    assert list(s3.objects) == []


def test_a_staged_job_with_nothing_landed_is_not_taken_over_before_a_day(s3: Store) -> None:
    """Spark reaps the planning process's heartbeat after a minute: a job whose tasks have not
    started yet (or stage invisible uploads) must not fail for that."""
    clock = Clock()
    owner = _intent(s3, clock)
    owner.create("delta", staged=True)
    nothing = Table(set(), landed=False)
    clock.t += 3_600
    assert not abandoned(s3.view(), WHERE, nothing, _timing(clock))
    assert recover_jobs(s3.view(), WHERE, nothing, _timing(clock)) == 0
    assert owner.renew()  # the job goes on
    owner.fence()
    clock.t += 86_400 * 2
    assert recover_jobs(s3.view(), WHERE, nothing, _timing(clock)) == 1
    assert s3.objects == {}


def test_renewals_of_one_job_racing_each_other_do_not_fence_it(s3: Store) -> None:
    clock = Clock()
    driver, task = _intent(s3, clock), _intent(s3.view(), clock)
    driver.create("lance", staged=False)
    clock.t += 30
    assert task.renew()
    clock.t += 30
    assert driver.renew()  # its last read is stale: it re-reads and renews
    driver.fence()
    assert not task.renew()  # past "staged": only the commit renews now
    assert driver.keep_committing()
    driver.remove()
    assert s3.objects == {}


def test_a_second_recoverer_loses_the_takeover(s3: Store) -> None:
    clock = Clock()
    _intent(s3, clock).create("lance", staged=False)
    clock.t += 61
    first = Table({"data/a.lance"})

    class Racing(Table):
        def discard(self, intent: dict[str, Any]) -> None:
            assert recover_jobs(s3.view(), WHERE, first, _timing(clock)) == 0
            super().discard(intent)

    racing = Racing({"data/a.lance"})
    assert recover_jobs(s3.view(), WHERE, racing, _timing(clock)) == 1
    assert racing.discarded == ["w1"]
    assert first.discarded == []


def test_a_renewal_beaten_by_a_sibling_task_counts_as_renewed(s3: Store, kind: str) -> None:
    """Many tasks of one job renew at once: the one whose PUT loses to a sibling's is not
    fenced (it would fail a healthy job), the lease is fresh anyway."""
    clock = Clock()
    _intent(s3, clock).create("lance", staged=False)
    clock.t += 30
    sibling = _intent(s3.view(), clock)
    racing = s3.view(faults={2: Fault(kind="stall")})  # paused between its read and its PUT
    racing.on_stall = lambda: sibling.renew_once() or None
    assert _intent(racing, clock).renew()
    assert [op for op, _ in racing.calls] == RENEWAL_OPS[kind]
    assert _body(s3)["at"] == clock.t


def test_the_files_a_killed_job_left_on_the_store_go_and_nothing_else(s3: Store) -> None:
    """The resolver deletes through the same store the intent is on: the job's objects and its
    intent go; the table's other objects (a committed job's file, a live job's intent) stay."""
    from lakegate_client.engine.stores import as_store

    clock = Clock()
    store = as_store(s3, WHERE.bucket)
    for rel in ("part-w1-0.parquet", "part-w1-1.parquet", "part-w0-0.parquet"):
        store.put(WHERE.key(rel), b"rows")
    _intent(s3, clock).create("delta", staged=False)
    clock.t += 61
    _intent(s3, clock, "w2").create("delta", staged=False)  # a live job, started later

    class OnStore(Table):
        def discard(self, intent: dict[str, Any]) -> None:
            super().discard(intent)
            for key in store.list(WHERE.key(f"part-{intent['write_id']}-")):
                store.delete(key)

    assert recover_jobs(s3, WHERE, OnStore(set()), _timing(clock)) == 1
    assert sorted(WHERE.relative(k) for k in store.list(f"{WHERE.prefix}/")) == [
        intent_name("w2"), "part-w0-0.parquet"]


def test_a_job_confirmed_alive_counts_as_confirmed_for_a_thirtieth_of_its_lease(
        s3: Store) -> None:
    monotonic = Clock()
    alive = AliveJobs(clock=monotonic)
    job, other = _intent(s3, Clock()), _intent(s3, Clock(), write_id="w2")
    assert not alive.confirmed(job)
    alive.note(job)
    assert alive.confirmed(job)
    assert not alive.confirmed(other)  # another job of the same table is its own
    monotonic.t += 1.9  # the default lease (60 s) / 30 = 2 s
    assert alive.confirmed(job)
    monotonic.t += 0.2
    assert not alive.confirmed(job)


def test_the_record_of_alive_jobs_keeps_only_the_newest() -> None:
    alive = AliveJobs(clock=Clock(), size=2)
    jobs = [_intent(FakeS3(), Clock(), write_id=f"w{n}") for n in range(3)]
    for job in jobs:
        alive.note(job)
    assert [alive.confirmed(job) for job in jobs] == [False, True, True]


QUICK = JobTiming(lease_s=0.08)  # a renewal every 20 ms, due once the lease is 10 ms old


def _wait_until(done: Callable[[], bool], timeout_s: float = 5.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not done():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.005)


def _keepers() -> int:
    return sum(t.name == "lakegate-lease-keeper" for t in threading.enumerate())


def _ats(s3: Store, jobs: list[JobIntent]) -> list[float]:
    return [float(_body(s3, j.write_id)["at"]) for j in jobs]


def test_one_keeper_thread_renews_every_held_lease_until_it_is_released(s3: Store) -> None:
    """Issue 36: a thread per task's lease cost 1-9 ms to start; one thread per process
    renews them all, and a released lease is renewed no more."""
    jobs = [JobIntent(s3, WHERE, f"w{n}", QUICK) for n in range(3)]
    for job in jobs:
        job.create("lance", staged=False)
    first, before, keeper = _ats(s3, jobs), _keepers(), LeaseKeeper()
    with keeper.hold(jobs[0]), keeper.hold(jobs[1]):
        token = keeper.keep(jobs[2])
        assert keeper.holding() == 3
        _wait_until(lambda: all(a > b for a, b in zip(_ats(s3, jobs), first, strict=True)))
        assert _keepers() == before + 1
        keeper.release(token)
    assert keeper.holding() == 0
    time.sleep(0.05)  # a renewal under way at the release may still land
    released = _ats(s3, jobs)
    time.sleep(0.15)  # several periods
    assert _ats(s3, jobs) == released


def test_the_keeper_drops_a_job_taken_over_or_fenced_and_keeps_a_committing_one(
        s3: Store) -> None:
    keeper = LeaseKeeper()
    taken, fenced = JobIntent(s3, WHERE, "w1", QUICK), JobIntent(s3, WHERE, "w2", QUICK)
    for job in (taken, fenced):
        job.create("lance", staged=False)
    with keeper.hold(taken), keeper.hold(fenced):
        body = {**_body(s3, "w1"), "owner": "recovery-1"}
        taken.store.put(WHERE.key(intent_name("w1")), json.dumps(body).encode())
        fenced.fence(files=[])
        _wait_until(lambda: keeper.holding() == 0)  # neither is this job's staged one now
    before = _ats(s3, [fenced])
    with keeper.hold(fenced, committing=True):
        _wait_until(lambda: _ats(s3, [fenced]) > before)  # the commit's heartbeat
        assert _body(s3, "w2")["state"] == "committing"


def test_a_forked_child_starts_its_own_keeper_thread() -> None:
    """PySpark forks its Python workers from a daemon: the child has none of the parent's
    threads, so a keeper inherited with holds (and maybe a held lock) starts over there."""
    import os

    s3 = FakeS3()
    parent, child = JobIntent(s3, WHERE, "w1", QUICK), JobIntent(s3, WHERE, "w2", QUICK)
    for job in (parent, child):
        job.create("lance", staged=False)
    keeper = LeaseKeeper()
    with keeper.hold(parent):
        pid = os.fork()
        if pid == 0:  # the child: its own holds only, renewed by its own thread
            code = 1
            try:
                ok = keeper.holding() == 0
                before = _ats(s3, [child])
                with keeper.hold(child):
                    _wait_until(lambda: _ats(s3, [child]) > before, timeout_s=2.0)
                code = 0 if ok else 2
            finally:
                os._exit(code)
        status = None
        deadline = time.monotonic() + 10.0
        while status is None and time.monotonic() < deadline:
            done, raw = os.waitpid(pid, os.WNOHANG)
            status = os.waitstatus_to_exitcode(raw) if done else None
            time.sleep(0.01)
        if status is None:  # stuck on a lock its parent's thread held at the fork
            os.kill(pid, 9)
            os.waitpid(pid, 0)
        assert keeper.holding() == 1
    assert status == 0
