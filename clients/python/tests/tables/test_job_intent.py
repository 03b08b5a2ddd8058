"""The job intent of Delta, Iceberg and Lance writes (``tables/job_intent.py``): a lease the
job's processes renew, a fence before the commit call, and a recovery that takes an expired job
over and removes its files only when its write id is proven absent."""

from __future__ import annotations

import json
from typing import Any

import pytest

from lakegate_client.tables.job_intent import (
    JobFencedError,
    JobIntent,
    JobTiming,
    abandoned,
    intent_name,
    recover_jobs,
)
from lakegate_client.tables.staged import S3Location

from .fake_s3 import FakeS3

WHERE = S3Location("b", "wh/t")


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

    def landed(self, intent: dict[str, Any]) -> bool:
        return self.has_landed

    def committed(self, intent: dict[str, Any]) -> bool | None:
        return self.state

    def discard(self, intent: dict[str, Any]) -> None:
        self.discarded.append(str(intent["write_id"]))
        self.files.clear()


def _timing(clock: Clock) -> JobTiming:
    return JobTiming(now=clock, sleep=lambda _s: None, lease_s=60.0, commit_bound_s=600.0,
                     stale_staged_s=86_400.0)


def _intent(s3: FakeS3, clock: Clock, write_id: str = "w1") -> JobIntent:
    return JobIntent(s3, WHERE, write_id, _timing(clock))


def _body(s3: FakeS3, write_id: str = "w1") -> dict[str, Any]:
    return dict(json.loads(s3.objects[WHERE.key(intent_name(write_id))]))


def test_a_job_killed_before_its_commit_loses_its_files_to_the_next_recovery() -> None:
    s3, clock = FakeS3(), Clock()
    _intent(s3, clock).create("lance", staged=False)
    table = Table({"data/a.lance"})
    assert recover_jobs(s3.view(), WHERE, table, _timing(clock)) == 0  # the lease is alive
    clock.t += 61
    assert abandoned(s3.view(), WHERE, table, _timing(clock))
    assert recover_jobs(s3.view(), WHERE, table, _timing(clock)) == 1
    assert table.files == set()
    assert table.discarded == ["w1"]
    assert s3.objects == {}


def test_a_stale_owner_cannot_commit_after_a_takeover() -> None:
    """The owner stalled past its lease; a recoverer took the job over and removed its files.
    The owner's fence then fails, so its commit call is never made."""
    s3, clock = FakeS3(), Clock()
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


def test_a_committing_job_is_left_alone_until_its_commit_call_can_no_longer_land() -> None:
    s3, clock = FakeS3(), Clock()
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


def test_a_committed_job_keeps_its_files_and_an_unreadable_table_keeps_the_intent() -> None:
    s3, clock = FakeS3(), Clock()
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

    assert recover_jobs(s3.view(), WHERE, Both(set()), _timing(clock)) == 1
    assert list(s3.objects) == [WHERE.key(intent_name("w2"))]  # w1's intent is gone
    assert _body(s3, "w2")["owner"].startswith("recovery-")  # left for a later recovery


def test_a_staged_job_with_nothing_landed_is_not_taken_over_before_a_day() -> None:
    """Spark reaps the planning process's heartbeat after a minute: a job whose tasks have not
    started yet (or stage invisible uploads) must not fail for that."""
    s3, clock = FakeS3(), Clock()
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


def test_renewals_of_one_job_racing_each_other_do_not_fence_it() -> None:
    s3, clock = FakeS3(), Clock()
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


def test_a_second_recoverer_loses_the_takeover() -> None:
    s3, clock = FakeS3(), Clock()
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


def test_a_renewal_beaten_by_a_sibling_task_counts_as_renewed() -> None:
    """Many tasks of one job renew at once: the one whose PUT loses to a sibling's is not
    fenced (it would fail a healthy job), the lease is fresh anyway."""
    from .fake_s3 import Fault

    s3, clock = FakeS3(), Clock()
    _intent(s3, clock).create("lance", staged=False)
    clock.t += 30
    sibling = _intent(s3.view(), clock)
    racing = s3.view(faults={2: Fault(kind="stall")})  # paused between its read and its PUT
    racing.on_stall = lambda: sibling.renew_once() or None
    assert _intent(racing, clock).renew()
    assert [op for op, _ in racing.calls] == ["GetObject", "PutObject", "GetObject"]
    assert _body(s3)["at"] == clock.t
