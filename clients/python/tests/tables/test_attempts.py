"""The Lance attempt ledger: an attempt that finishes after its job ended leaves no file."""

from __future__ import annotations

import json

import pytest

from lakegate_client.tables.attempts import (
    CLOSED,
    JobClosedError,
    check_in,
    close_job,
    discard_unused,
)
from lakegate_client.tables.staged import S3Location

from .fake_s3 import FakeS3

WHERE = S3Location("bucket", "wh/t")


def _land(s3: FakeS3, *files: str) -> list[str]:
    for rel in files:
        s3.put_object(Bucket="bucket", Key=WHERE.key(rel), Body=b"fragment")
    return list(files)


def _left(s3: FakeS3) -> list[str]:
    return sorted(WHERE.relative(k) for k in s3.objects if WHERE.relative(k) != CLOSED)


def test_commit_keeps_the_used_files_and_removes_a_recorded_duplicate() -> None:
    """Regression: a speculative duplicate's fragment file stayed under data/ (an orphan)."""
    s3 = FakeS3()
    check_in(s3, WHERE, "w1", 0, 0, _land(s3, "data/a.lance"))  # the slowed first attempt
    check_in(s3, WHERE, "w1", 0, 1, _land(s3, "data/b.lance"))  # its speculative copy (used)
    check_in(s3, WHERE, "w2", 0, 0, _land(s3, "data/other-job.lance"))
    close_job(s3, WHERE, "w1")
    assert discard_unused(s3, WHERE, "w1", ["data/b.lance"]) == ["data/a.lance"]
    assert _left(s3) == ["_lakegate_attempts/w2/00000-0-" + _suffix(s3, "w2"),
                         "data/b.lance", "data/other-job.lance"]


def _suffix(s3: FakeS3, write_id: str) -> str:
    prefix = WHERE.key(f"_lakegate_attempts/{write_id}/00000-0-")
    return next(k[len(prefix):] for k in s3.objects if k.startswith(prefix))


def test_an_attempt_finishing_after_the_job_ended_deletes_its_own_files() -> None:
    """Regression: a task still running at abort landed its fragment after abort's cleanup."""
    s3 = FakeS3()
    close_job(s3, WHERE, "w1")  # abort (or commit) ran first
    discard_unused(s3, WHERE, "w1", ())
    with pytest.raises(JobClosedError, match="already ended"):
        check_in(s3, WHERE, "w1", 2, 0, _land(s3, "data/late.lance"))
    assert _left(s3) == []


def test_closing_keeps_other_jobs_and_forgets_day_old_ones(monkeypatch: pytest.MonkeyPatch) -> None:
    s3 = FakeS3()
    close_job(s3, WHERE, "old")
    monkeypatch.setattr("lakegate_client.tables.attempts.time.time", lambda: 1e12)
    close_job(s3, WHERE, "w1")
    close_job(s3, WHERE, "w2")
    jobs = json.loads(s3.objects[WHERE.key(CLOSED)])["jobs"]
    assert sorted(jobs) == ["w1", "w2"]


def test_aws_conflict_answers_are_conflicts_not_errors(monkeypatch: pytest.MonkeyPatch) -> None:
    """Regression (issue 32 finding 3): only 412 counted as "someone else got there first";
    AWS's 409 ConditionalRequestConflict and its 404 to If-Match on a key gone meanwhile were
    raised as errors (a failed create claim or a failed close of the job)."""
    from lakegate_client.tables import attempts

    from .fake_s3 import Fault

    conflict = Fault(code="ConditionalRequestConflict", status=409)
    s3 = FakeS3(aws_conflicts=True, faults={2: conflict})  # 1: read closed.json, 2: its PUT
    close_job(s3, WHERE, "w-1")  # refused once (409), then recorded
    assert "w-1" in json.loads(s3.objects[WHERE.key(CLOSED)])["jobs"]

    import time

    s3 = FakeS3(aws_conflicts=True)
    s3.put_object(Bucket="b", Key=WHERE.key(attempts.CREATE),
                  Body=json.dumps({"write_id": "w-a", "at": time.time()}).encode())
    raced = s3.view(faults={1: conflict})  # our claim PUT meets a concurrent one
    assert attempts.claim_create(raced, WHERE, "w-b") is False
    s3.put_object(Bucket="b", Key=WHERE.key(attempts.CREATE),
                  Body=json.dumps({"write_id": "w-a", "at": 0}).encode())  # a stale claim
    gone = s3.view(faults={1: conflict, 3: Fault(code="NoSuchKey", status=404)})
    assert attempts.claim_create(gone, WHERE, "w-b") is False  # takeover: the claim moved
    empty = FakeS3(aws_conflicts=True, faults={1: conflict})  # the rival's claim not yet visible
    assert attempts.claim_create(empty, WHERE, "w-b") is False


def test_the_driver_reads_records_and_deletes_files_in_parallel() -> None:
    """Issue 36: one record read and one delete at a time made a 200-task Lance commit wait on
    400 serial calls. They overlap now; the outcome is the same: unused files and every record
    gone, the used files kept."""
    import threading
    import time

    class Slow(FakeS3):
        flight = most = 0
        guard = threading.Lock()

        def _slow(self, call: object) -> dict[str, object]:
            with self.guard:
                Slow.flight += 1
                Slow.most = max(Slow.most, Slow.flight)
            time.sleep(0.03)
            try:
                return call()  # type: ignore[operator,no-any-return]
            finally:
                with self.guard:
                    Slow.flight -= 1

        def get_object(self, **kw: str) -> dict[str, object]:
            return self._slow(lambda: super(Slow, self).get_object(**kw))

        def delete_object(self, **kw: str) -> dict[str, object]:
            return self._slow(lambda: super(Slow, self).delete_object(**kw))

    s3 = Slow()
    for part in range(6):
        check_in(s3, WHERE, "w1", part, 0, _land(s3, f"data/p{part}-a.lance"))
        check_in(s3, WHERE, "w1", part, 1, _land(s3, f"data/p{part}-b.lance"))
    close_job(s3, WHERE, "w1")
    Slow.most = 0
    used = [f"data/p{part}-a.lance" for part in range(6)]
    assert sorted(discard_unused(s3, WHERE, "w1", used)) == [f"data/p{p}-b.lance" for p in range(6)]
    assert _left(s3) == sorted(used)
    assert Slow.most > 1


def test_the_ledger_and_the_create_claim_run_on_adls() -> None:
    """Issue 34: the ledger and the create claim are ``ObjectStore`` calls, so on ADLS a
    duplicate's and a late attempt's files are removed too, and one job holds the claim."""
    from lakegate_client.tables.attempts import claim_create

    from .fake_adls import FakeAdls

    store = FakeAdls()

    def land(rel: str) -> list[str]:
        store.put(WHERE.key(rel), b"fragment")
        return [rel]

    check_in(store, WHERE, "w1", 0, 0, land("data/a.lance"))
    check_in(store, WHERE, "w1", 0, 1, land("data/b.lance"))
    close_job(store, WHERE, "w1")
    assert discard_unused(store, WHERE, "w1", ["data/b.lance"]) == ["data/a.lance"]
    with pytest.raises(JobClosedError):
        check_in(store, WHERE, "w1", 1, 0, land("data/late.lance"))
    assert sorted(WHERE.relative(k) for k in store.objects
                  if WHERE.relative(k) != CLOSED) == ["data/b.lance"]
    assert claim_create(store, WHERE, "w2") is True
    assert claim_create(store.view(), WHERE, "w3") is False  # 409 BlobAlreadyExists: held
    assert claim_create(store.view(), WHERE, "w2") is True  # the holder asks again


def test_the_records_of_reported_attempts_are_deleted_unread() -> None:
    """The commit read back every attempt's record, one GET per task (200 at 200 partitions),
    to learn files it already had from the attempts' reports (issue 36). Only the records no
    accepted attempt reported (a duplicate's) are read; every record and the duplicate's file
    still go."""
    s3 = FakeS3()
    used = [check_in(s3, WHERE, "w1", p, 0, _land(s3, f"data/p{p}.lance")) for p in range(3)]
    duplicate = check_in(s3, WHERE, "w1", 0, 1, _land(s3, "data/p0-copy.lance"))
    close_job(s3, WHERE, "w1")
    seen = len(s3.calls)
    files = [f"data/p{p}.lance" for p in range(3)]
    assert discard_unused(s3, WHERE, "w1", files, used) == ["data/p0-copy.lance"]
    reads = [key for op, key in s3.calls[seen:] if op == "GetObject"]
    assert reads == [WHERE.key(duplicate)]
    assert _left(s3) == files
