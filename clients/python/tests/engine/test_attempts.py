"""The Lance attempt ledger: an attempt that finishes after its job ended leaves no file."""

from __future__ import annotations

import itertools
import json
from typing import Any

import pytest

from lakegate_client.engine.attempts import LEDGER, NAME_MAX, check_in, discard_unused, named_files
from lakegate_client.engine.job_intent import JOB_PREFIX, JobIntent
from lakegate_client.engine.stores.base import S3Location

from .stores.fake_s3 import FakeS3, Fault

WHERE = S3Location("bucket", "wh/t")


def _land(s3: FakeS3, *files: str) -> list[str]:
    for rel in files:
        s3.put_object(Bucket="bucket", Key=WHERE.key(rel), Body=b"fragment")
    return list(files)


def _long(name: str) -> str:
    """A file name too long for a record's name: its record keeps the files in its body."""
    return f"data/{name}-{'x' * NAME_MAX}.lance"


def _left(s3: FakeS3) -> list[str]:
    return sorted(WHERE.relative(k) for k in s3.objects if JOB_PREFIX not in k)


def _started(s3: Any, write_id: str) -> JobIntent:
    """Planning: the job's intent, which exists before any of its attempts writes."""
    intent = JobIntent(s3, WHERE, write_id)
    intent.create("lance")
    return intent


def test_commit_keeps_the_used_files_and_removes_a_recorded_duplicate() -> None:
    """Regression: a speculative duplicate's fragment file stayed under data/ (an orphan)."""
    s3 = FakeS3()
    check_in(s3, WHERE, "w1", 0, 0, _land(s3, "data/a.lance"))  # the slowed first attempt
    check_in(s3, WHERE, "w1", 0, 1, _land(s3, "data/b.lance"))  # its speculative copy (used)
    _started(s3, "w2")  # running: its record and file stay
    check_in(s3, WHERE, "w2", 0, 0, _land(s3, "data/other-job.lance"))
    assert discard_unused(s3, WHERE, "w1", ["data/b.lance"]) == ["data/a.lance"]
    assert _left(s3) == ["_lakegate_attempts/w2/00000-0-" + _suffix(s3, "w2"),
                         "data/b.lance", "data/other-job.lance"]


def _suffix(s3: FakeS3, write_id: str) -> str:
    prefix = WHERE.key(f"_lakegate_attempts/{write_id}/00000-0-")
    return next(k[len(prefix):] for k in s3.objects if k.startswith(prefix))


def test_an_attempt_finishing_after_its_job_ended_is_swept_by_the_next_cleanup() -> None:
    """Regression: a task still running at abort landed its fragment after abort's cleanup.
    Its job's intent is gone by then, so the next job's cleanup takes its files and record."""
    s3 = FakeS3()
    w1 = _started(s3, "w1")
    discard_unused(s3, WHERE, "w1", ())  # abort (or commit) ran first
    w1.remove()
    check_in(s3, WHERE, "w1", 2, 0, _land(s3, "data/late.lance"))  # the attempt reports to no one
    assert _left(s3) != []
    _started(s3, "w2")
    assert discard_unused(s3, WHERE, "w2", ()) == []  # only the job's own files are returned
    assert _left(s3) == []


def test_the_records_of_a_job_whose_intent_remains_are_never_swept() -> None:
    """A job still running, committing, or left to a recoverer (its cleanup failed) keeps an
    intent: its records may name the files its commit uses."""
    s3 = FakeS3()
    _started(s3, "w1")
    check_in(s3, WHERE, "w1", 0, 0, _land(s3, "data/used.lance"))
    _started(s3, "w2")
    discard_unused(s3, WHERE, "w2", ())
    assert _left(s3) == [f"{LEDGER}/w1/00000-0-" + _suffix(s3, "w1"), "data/used.lance"]


def test_a_record_from_before_the_sweep_is_never_swept() -> None:
    """Upgrade safety: an older driver removed its intent even when its cleanup failed, so an
    older record (no "sweep" field) may name a file its commit uses."""
    s3 = FakeS3()
    _land(s3, "data/used.lance")
    s3.put_object(Bucket="bucket", Key=WHERE.key(f"{LEDGER}/old/00000-0-abcd.json"),
                  Body=json.dumps({"files": ["data/used.lance"]}).encode())
    _started(s3, "w2")
    discard_unused(s3, WHERE, "w2", ())
    assert _left(s3) == [f"{LEDGER}/old/00000-0-abcd.json", "data/used.lance"]


@pytest.mark.parametrize("garbage", [b"not json", b"\xff\xfe", b"[1, 2]", b'{"files": 3}'])
def test_an_object_that_is_not_a_record_is_never_swept_and_does_not_stop_the_sweep(
        garbage: bytes) -> None:
    s3 = FakeS3()
    s3.put_object(Bucket="bucket", Key=WHERE.key(f"{LEDGER}/ended/00000-0-bad.json"), Body=garbage)
    check_in(s3, WHERE, "ended", 1, 0, _land(s3, "data/late.lance"))
    _started(s3, "w2")
    discard_unused(s3, WHERE, "w2", ())
    assert _left(s3) == [f"{LEDGER}/ended/00000-0-bad.json"]  # the late attempt's went
    _started(s3, "w3")
    s3.put_object(Bucket="bucket", Key=WHERE.key(f"{LEDGER}/w3/00000-0-bad.json"), Body=garbage)
    with pytest.raises(ValueError, match="not an attempt record"):  # its own: the intent stays
        discard_unused(s3, WHERE, "w3", ())


def test_a_failing_sweep_does_not_fail_the_jobs_own_cleanup() -> None:
    s3 = FakeS3()
    check_in(s3, WHERE, "ended", 0, 0, _land(s3, "data/late.lance"))
    _started(s3, "w2")
    check_in(s3, WHERE, "w2", 0, 1, _land(s3, "data/duplicate.lance"))
    calls = len(s3.calls)
    # 1 listing of the ledger, 1 delete, 1 delete, 1 listing of intents, 1 look at the record
    s3.faults = {calls + 5: Fault()}
    assert discard_unused(s3, WHERE, "w2", ()) == ["data/duplicate.lance"]
    assert _left(s3) == [f"{LEDGER}/ended/00000-0-" + _suffix(s3, "ended"), "data/late.lance"]


@pytest.mark.parametrize(("file", "calls"), [
    ("data/duplicate.lance", 2),  # the listing, the file's delete (the record names it)
    (_long("duplicate"), 3),  # the listing, the record's read, the file's delete
])
def test_a_failing_own_cleanup_raises_and_keeps_the_records_of_undeleted_files(
        file: str, calls: int) -> None:
    """The caller keeps the job's intent when this raises; a record must outlive its files,
    or a recoverer could no longer find them."""
    s3 = FakeS3(batch_deletes=False)
    _started(s3, "w1")
    record = check_in(s3, WHERE, "w1", 0, 1, _land(s3, file))
    s3.faults = {len(s3.calls) + calls: Fault()}
    with pytest.raises(Exception, match="ServiceUnavailable"):
        discard_unused(s3, WHERE, "w1", ())
    assert _left(s3) == sorted([record, file])
    s3.faults = {}
    assert discard_unused(s3, WHERE, "w1", ()) == [file]
    assert _left(s3) == []


def test_a_record_carries_its_files_in_its_name_and_its_body_is_empty() -> None:
    """Issue 36: the task's one PUT is an empty object (no data chunk to store), and a
    cleanup learns an unreported attempt's files from the listing, without reading it."""
    s3 = FakeS3()
    files = _land(s3, "data/a.lance", "data/b b+é.lance")
    record = check_in(s3, WHERE, "w1", 3, 1, files)
    assert record.startswith(f"{LEDGER}/w1/00003-1-")
    assert record.endswith(".files")
    assert len(record.rsplit("/", 1)[1]) <= NAME_MAX
    assert s3.objects[WHERE.key(record)] == b""
    assert named_files(record) == files
    _started(s3, "w1")
    seen = len(s3.calls)
    assert discard_unused(s3, WHERE, "w1", ()) == files
    assert not [key for op, key in s3.calls[seen:] if op in ("GetObject", "HeadObject")]
    assert _left(s3) == []


def test_files_too_long_for_a_name_go_in_the_records_body() -> None:
    s3 = FakeS3()
    files = _land(s3, _long("a"))
    record = check_in(s3, WHERE, "w1", 0, 0, files)
    assert record.endswith(".json")
    assert named_files(record) is None
    assert json.loads(s3.objects[WHERE.key(record)])["files"] == files
    _started(s3, "w1")
    assert discard_unused(s3, WHERE, "w1", ()) == files


@pytest.mark.parametrize("name", ["00000-0-ab.!!!.files", "00000-0-ab.e30.files",  # {}
                                  "00000-0-ab.WzFd.files", "00000-0-ab.x.y.files"])  # [1]
def test_a_name_that_carries_no_file_list_is_not_a_record(name: str) -> None:
    """Hostile or damaged names under the ledger: never swept, and the job's own one fails its
    cleanup (its intent stays), as a record whose body is not one."""
    assert named_files(f"{LEDGER}/w/{name}") is None
    s3 = FakeS3()
    s3.put_object(Bucket="bucket", Key=WHERE.key(f"{LEDGER}/ended/{name}"), Body=b"")
    check_in(s3, WHERE, "ended", 1, 0, _land(s3, "data/late.lance"))
    _started(s3, "w2")
    discard_unused(s3, WHERE, "w2", ())
    assert _left(s3) == [f"{LEDGER}/ended/{name}"]
    _started(s3, "w3")
    s3.put_object(Bucket="bucket", Key=WHERE.key(f"{LEDGER}/w3/{name}"), Body=b"")
    with pytest.raises(ValueError, match="not an attempt record"):
        discard_unused(s3, WHERE, "w3", ())


def test_a_named_record_its_job_removed_after_the_listing_is_not_swept() -> None:
    """Why the sweep looks at a named record again after listing the intents: the record was
    listed while its job ran, then that job's commit used its files, deleted the record and
    removed the intent. Without the look, the sweep would take committed files."""
    s3 = FakeS3()
    running = _started(s3, "w1")
    used = _land(s3, "data/used.lance")
    check_in(s3, WHERE, "w1", 0, 0, used)
    _started(s3, "w2")

    listings = 0
    original = s3.list_objects_v2

    def list_objects_v2(**kw: Any) -> Any:
        nonlocal listings
        listings += 1
        if listings == 2:  # w2's listing of the intents: w1 ends just before it
            discard_unused(s3, WHERE, "w1", used)
            running.remove()
        return original(**kw)
    s3.list_objects_v2 = list_objects_v2  # type: ignore[method-assign]
    discard_unused(s3, WHERE, "w2", ())
    assert _left(s3) == used


def _driver_calls(s3: FakeS3, used: list[str], reported: list[str]) -> None:
    """The driver's end of job w1 on the ledger: its cleanup, then its intent's removal."""
    discard_unused(s3, WHERE, "w1", used, reported)
    JobIntent(s3, WHERE, "w1").remove()


def _job_ending(ending: str, points: int, land_at: int = 0, record_at: int = 0
                ) -> tuple[FakeS3, int]:
    """Job w1 with one reported attempt ends (``commit``: its file is used; ``abort``: deleted
    first) while a late attempt of w1, another process, lands its file before driver call
    ``land_at`` and records it before call ``record_at`` (``points``: after the last call; 0:
    no late attempt). Returns the store and how many calls the driver made."""
    s3 = FakeS3()
    _started(s3, "w1")
    reported = [check_in(s3, WHERE, "w1", 0, 0, _land(s3, "data/used.lance"))]
    if ending == "abort":
        s3.delete_object(Bucket="bucket", Key=WHERE.key("data/used.lance"))
    task = s3.view()
    steps = iter([lambda: _land(task, "data/late.lance"),
                  lambda: check_in(task, WHERE, "w1", 0, 1, ["data/late.lance"])])
    todo = [n for n in (land_at, record_at) if n]
    base = len(s3.calls)
    s3.faults = {base + n: Fault(kind="stall") for n in todo if n < points}

    def late() -> None:
        while todo and todo[0] == len(s3.calls) - base:  # the steps due before this call
            todo.pop(0)
            next(steps)()
    s3.on_stall = late
    _driver_calls(s3, ["data/used.lance"] if ending == "commit" else [],
                  reported if ending == "commit" else [])
    for _ in todo:  # the steps due after the driver's last call
        next(steps)()
    return s3, len(s3.calls) - base


@pytest.mark.parametrize("ending", ["commit", "abort"])
def test_a_late_attempt_at_every_point_of_the_drivers_end_leaves_nothing_after_the_next_job(
        ending: str) -> None:
    """Model check of the ledger: a late attempt (a speculative copy, a task still running at
    abort) lands its file and records it at every pair of points of the driver's calls
    (before the first, between any two, after the last). Whatever the interleaving, the
    commit's files stay, and once the next job's cleanup ran no file of the late attempt is
    left, nor any record."""
    points = _job_ending(ending, 0)[1] + 1  # "before call n" for each call, and after the last
    assert points >= 5
    used = ["data/used.lance"] if ending == "commit" else []
    for land_at, record_at in itertools.combinations_with_replacement(range(1, points + 1), 2):
        s3, _ = _job_ending(ending, points, land_at, record_at)
        where = f"late file at point {land_at}, record at {record_at}"
        assert ("data/used.lance" in _left(s3)) is (ending == "commit"), where
        if record_at == 1:  # recorded before the driver's listing: the driver deletes it
            assert "data/late.lance" not in _left(s3), where
        _started(s3, "w2")
        discard_unused(s3, WHERE, "w2", ())
        assert _left(s3) == used, where


def test_aws_conflict_answers_are_conflicts_not_errors(monkeypatch: pytest.MonkeyPatch) -> None:
    """Regression (issue 32 finding 3): only 412 counted as "someone else got there first";
    AWS's 409 ConditionalRequestConflict and its 404 to If-Match on a key gone meanwhile were
    raised as errors (a failed create claim or a failed close of the job)."""
    from lakegate_client.engine import attempts

    from .stores.fake_s3 import Fault

    conflict = Fault(code="ConditionalRequestConflict", status=409)
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
    for part in range(6):  # records with their files in their bodies: each read once
        check_in(s3, WHERE, "w1", part, 0, _land(s3, _long(f"p{part}-a")))
        check_in(s3, WHERE, "w1", part, 1, _land(s3, _long(f"p{part}-b")))
    Slow.most = 0
    used = [_long(f"p{part}-a") for part in range(6)]
    assert sorted(discard_unused(s3, WHERE, "w1", used)) == sorted(_long(f"p{p}-b")
                                                                   for p in range(6))
    assert _left(s3) == sorted(used)
    assert Slow.most > 1


def test_the_ledger_and_the_create_claim_run_on_adls() -> None:
    """Issue 34: the ledger and the create claim are ``ObjectStore`` calls, so on ADLS a
    duplicate's and a late attempt's files are removed too, and one job holds the claim."""
    from lakegate_client.engine.attempts import claim_create

    from .stores.fake_adls import FakeAdls

    store = FakeAdls()

    def land(rel: str) -> list[str]:
        store.put(WHERE.key(rel), b"fragment")
        return [rel]

    check_in(store, WHERE, "w1", 0, 0, land("data/a.lance"))
    check_in(store, WHERE, "w1", 0, 1, land("data/b.lance"))
    w1 = _started(store, "w1")
    assert discard_unused(store, WHERE, "w1", ["data/b.lance"]) == ["data/a.lance"]
    w1.remove()
    check_in(store, WHERE, "w1", 1, 0, land("data/late.lance"))
    _started(store, "w2")
    discard_unused(store, WHERE, "w2", ())
    assert sorted(WHERE.relative(k) for k in store.objects
                  if JOB_PREFIX not in k) == ["data/b.lance"]
    assert claim_create(store, WHERE, "w2") is True
    assert claim_create(store.view(), WHERE, "w3") is False  # 409 BlobAlreadyExists: held
    assert claim_create(store.view(), WHERE, "w2") is True  # the holder asks again


def test_the_records_of_reported_attempts_are_deleted_unread() -> None:
    """The commit read back every attempt's record, one GET per task (200 at 200 partitions),
    to learn files it already had from the attempts' reports (issue 36). Only the records no
    accepted attempt reported (a duplicate's) are read; every record and the duplicate's file
    still go."""
    s3 = FakeS3()
    files = [_long(f"p{p}") for p in range(3)]
    used = [check_in(s3, WHERE, "w1", p, 0, _land(s3, files[p])) for p in range(3)]
    duplicate = check_in(s3, WHERE, "w1", 0, 1, _land(s3, _long("p0-copy")))
    seen = len(s3.calls)
    assert discard_unused(s3, WHERE, "w1", files, used) == [_long("p0-copy")]
    reads = [key for op, key in s3.calls[seen:] if op == "GetObject"]
    assert reads == [WHERE.key(duplicate)]
    assert _left(s3) == sorted(files)


def test_a_reported_record_the_listing_does_not_show_yet_is_deleted_all_the_same() -> None:
    """On a store whose listings lag its PUTs, the commit's cleanup deleted only the records
    its listing showed: a used attempt's record stayed, the job's intent went, and the next
    cleanup swept that record as a late attempt's, deleting files the commit uses. The
    reported records go by name, whatever the listing shows."""
    s3 = FakeS3(lagging_listings=True)
    intent = _started(s3, "w1")
    files = _land(s3, "data/a.lance", "data/b.lance")
    reported = [check_in(s3, WHERE, "w1", p, 0, [f]) for p, f in enumerate(files)]
    assert discard_unused(s3, WHERE, "w1", files, reported) == []
    assert not any(LEDGER + "/w1/" in k for k in s3.objects)
    intent.remove(settled=True)
    s3.settle_listings()
    _started(s3, "w2")
    check_in(s3, WHERE, "w2", 0, 0, _land(s3, "data/c.lance"))
    s3.settle_listings()
    discard_unused(s3, WHERE, "w2", ["data/c.lance"])  # sweeps whatever ended jobs left
    assert _left(s3) == ["data/a.lance", "data/b.lance", "data/c.lance"]
