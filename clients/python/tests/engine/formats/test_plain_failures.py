"""Issue 32, plain tables: an error after the point of no return, a commit slower than the
lease, a driver killed mid-commit and AWS's conflict answers never tear a table or make a
committed job report failure (engine/formats/plain.py, engine/)."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

from lakegate_client.engine import job_files
from lakegate_client.engine.formats import plain as plain_commit
from lakegate_client.engine.formats.plain import (
    MARKER,
    WriteConflictError,
    commit_plain,
    plan_plain,
)
from lakegate_client.engine.stores import s3 as s3_store
from lakegate_client.engine.stores.base import PendingUpload, S3Location

from ..stores.fake_s3 import FakeS3, Fault, Killed
from .plain_scenarios import staged_parts, visible_data

WHERE = S3Location.parse("s3://b/wh/t1")
OLD = ["part-old-00000-r.parquet", "part-old-00001-r.parquet"]


def _stage(s3: FakeS3, write_id: str, n: int) -> list[PendingUpload]:
    return staged_parts(s3, WHERE, write_id, n)


def _data(s3: FakeS3) -> list[str]:
    return visible_data(s3, WHERE)


def _seed(s3: FakeS3) -> None:
    for rel in OLD:
        s3.objects[WHERE.key(rel)] = rel.encode()


def _mine(write_id: str, n: int) -> list[str]:
    return [f"part-{write_id}-{i:05d}-r.parquet" for i in range(n)]


def _first_call(s3: FakeS3, op: str) -> int:
    """The 1-based number of the first ``op`` call a fault-free run made."""
    return next(i for i, (name, _) in enumerate(s3.calls, 1) if name == op)


@pytest.fixture(autouse=True)
def _quick_retries(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(plain_commit, "BACKOFF_S", 0.0, raising=False)


def _overwrite_calls() -> FakeS3:
    """A fault-free overwrite, to number its calls."""
    s3 = FakeS3()
    _seed(s3)
    plan, ups = plan_plain(s3, WHERE, "parquet"), _stage(s3, "w1", 2)
    job = s3.view()
    commit_plain(job, WHERE, "parquet", plan, ups, overwrite=True, write_id="w1")
    return job


@pytest.mark.parametrize("op", ["DeleteObject", "PutObject-after"])
def test_an_error_after_the_uploads_completed_does_not_fail_the_commit(op: str) -> None:
    """Finding 1: one 503 on a delete of an old file (or on the last marker PUT) escaped
    commit, Spark's abort then deleted the new files, and the job said "nothing was written"."""
    numbered = _overwrite_calls()
    completes = [i for i, (name, _) in enumerate(numbered.calls, 1)
                 if name == "CompleteMultipartUpload"]
    if op == "DeleteObject":
        n = _first_call(numbered, "DeleteObject")
    else:  # the first marker PUT after the uploads completed
        n = next(i for i, (name, key) in enumerate(numbered.calls, 1)
                 if name == "PutObject" and key.endswith(MARKER) and i > completes[-1])
    s3 = FakeS3()
    _seed(s3)
    plan, ups = plan_plain(s3, WHERE, "parquet"), _stage(s3, "w1", 2)
    job = s3.view(faults={n: Fault()})
    commit_plain(job, WHERE, "parquet", plan, ups, overwrite=True, write_id="w1")  # no raise
    assert _data(s3) == _mine("w1", 2)
    # the table is released: the next overwrite goes through
    commit_plain(s3, WHERE, "parquet", plan_plain(s3, WHERE, "parquet"), _stage(s3, "w2", 1),
                 overwrite=True, write_id="w2")
    assert _data(s3) == _mine("w2", 1)


def test_the_spark_abort_of_a_plain_job_deletes_no_visible_file(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Finding 1, second half: ``abort`` deleted every file of the write id, committed ones
    included (``drop_job_files``)."""
    from lakegate_client.spark import writer
    from lakegate_client.spark.faults import Faults
    from lakegate_client.spark.options import SourceOptions
    from lakegate_client.tables.catalog import TableInfo

    s3 = FakeS3()
    _seed(s3)
    plan = plan_plain(s3, WHERE, "parquet")
    ups = _stage(s3, "w1", 2)
    for up in ups:  # the commit got past the point of no return (both files visible)
        s3.complete_multipart_upload(Bucket="b", Key=up.key, UploadId=up.upload_id,
                                     MultipartUpload={"Parts": [{"PartNumber": 1,
                                                                 "ETag": up.parts[0][1]}]})
    creds = type("C", (), {"location": "s3://b/wh/t1", "storage": "s3"})()
    dropped: list[str] = []

    def drop(_c: Any, write_id: str, keep: Any) -> list[str]:
        doomed = [rel for rel in _data(s3) if f"-{write_id}-" in rel and rel not in keep]
        for rel in doomed:
            s3.objects.pop(WHERE.key(rel))
        dropped.extend(doomed)
        return doomed

    monkeypatch.setattr(writer, "table_credentials", lambda *_a, **_k: creds)
    monkeypatch.setattr(s3_store, "s3_client", lambda _c: s3)
    monkeypatch.setattr(job_files, "drop_job_files", drop)
    info = TableInfo(namespace=("wh",), name="t1", format="parquet", location="s3://b/wh/t1")
    plan_w = writer.WritePlan(opts=SourceOptions(namespace=("wh",), table="t1"), info=info,
                              overwrite=False, write_id="w1", read_version=None, staged=True,
                              plain=plan, faults=Faults())
    w = writer.LakekeeperWriter(plan_w, None)  # type: ignore[arg-type]
    w.abort([writer.TaskResult(partition=i, uploads=(up,)) for i, up in enumerate(ups)])
    assert dropped == []
    assert _data(s3) == sorted(OLD + _mine("w1", 2))


class _SlowFirstComplete(FakeS3):
    """The first completion of ``slow_key`` takes ``delay`` seconds (outside the store lock)."""

    def __init__(self, slow_key: str, delay: float, **kw: Any) -> None:
        super().__init__(**kw)
        self.slow_key, self.delay = slow_key, delay
        self.entered = threading.Event()

    def complete_multipart_upload(self, **kw: Any) -> dict[str, Any]:
        if kw["Key"] == self.slow_key and not self.entered.is_set():
            self.entered.set()
            time.sleep(self.delay)
        return super().complete_multipart_upload(**kw)


def test_an_overwrite_slower_than_the_stale_time_keeps_its_table(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Finding 2: a second overwrite took the first's marker over as stale, the first's last
    marker PUT then failed, and both jobs failed with the table torn or empty. Now the first
    renews its lease while it commits: the second conflicts, the first commits."""
    monkeypatch.setattr(plain_commit, "STALE_COMMIT_S", 0.4, raising=False)  # the old protocol
    monkeypatch.setattr(plain_commit, "LEASE_S", 0.4, raising=False)
    base = FakeS3()
    _seed(base)
    a_ups = _stage(base, "wa", 2)
    s3 = _SlowFirstComplete(a_ups[0].key, 1.6)
    s3._store = base._store  # same objects
    plan_a = plan_plain(s3, WHERE, "parquet")
    errors: list[BaseException] = []

    def job_a() -> None:
        try:
            commit_plain(s3, WHERE, "parquet", plan_a, a_ups, overwrite=True, write_id="wa")
        except BaseException as exc:  # noqa: BLE001 - asserted below
            errors.append(exc)

    thread = threading.Thread(target=job_a)
    thread.start()
    assert s3.entered.wait(10)
    time.sleep(0.8)  # twice the stale time, while job a is still committing
    other = base.view()
    plan_b = plan_plain(other, WHERE, "parquet")
    with pytest.raises(WriteConflictError):
        commit_plain(other, WHERE, "parquet", plan_b, _stage(other, "wb", 1), overwrite=True,
                     write_id="wb")
    thread.join(20)
    assert errors == []
    assert _data(base) == _mine("wa", 2)


@pytest.mark.parametrize("op", ["CompleteMultipartUpload#2", "DeleteObject"])
def test_a_driver_killed_mid_commit_is_rolled_forward_by_the_next_writer(
    monkeypatch: pytest.MonkeyPatch, op: str,
) -> None:
    """The driver crash: killed after its first upload completed (or after its first delete),
    the table stayed torn (part of the new files, or new plus part of the old) until an
    overwrite more than 5 min later. Now the next writer's planning finishes the commit."""
    monkeypatch.setattr(plain_commit, "STALE_COMMIT_S", 0.2, raising=False)
    monkeypatch.setattr(plain_commit, "LEASE_S", 0.2, raising=False)
    numbered = _overwrite_calls()
    name, _, nth = op.partition("#")
    n = [i for i, (call, _) in enumerate(numbered.calls, 1) if call == name][int(nth or 1) - 1]
    s3 = FakeS3()
    _seed(s3)
    plan, ups = plan_plain(s3, WHERE, "parquet"), _stage(s3, "w1", 2)
    with pytest.raises(Killed):
        commit_plain(s3.view(faults={n: Fault(kind="kill")}), WHERE, "parquet", plan, ups,
                     overwrite=True, write_id="w1")
    time.sleep(0.5)  # the dead driver's lease (or stale time) runs out
    plan_plain(s3.view(), WHERE, "parquet")  # the next writer plans
    assert _data(s3) == _mine("w1", 2)


class _AwsConflicts(FakeS3):
    """AWS answers a conditional PUT of the marker racing another with 409."""

    def put_object(self, **kw: Any) -> dict[str, Any]:
        if kw["Key"].endswith(MARKER):
            raise FakeS3.exceptions.ClientError(
                {"Error": {"Code": "ConditionalRequestConflict"},
                 "ResponseMetadata": {"HTTPStatusCode": 409}}, "PutObject")
        return super().put_object(**kw)


def test_aws_409_on_the_marker_is_a_conflict_and_nothing_is_written() -> None:
    """Finding 3: only 412 was recognised; AWS's 409 was a raw error."""
    s3 = _AwsConflicts()
    _seed(s3)
    plan, ups = plan_plain(s3, WHERE, "parquet"), _stage(s3, "w1", 1)
    with pytest.raises(WriteConflictError):
        commit_plain(s3, WHERE, "parquet", plan, ups, overwrite=True, write_id="w1")
    assert _data(s3) == OLD


def test_aws_404_on_if_match_of_a_vanished_marker_is_a_conflict() -> None:
    """Finding 3: AWS answers If-Match on a missing key with 404 NoSuchKey."""
    s3 = FakeS3(aws_conflicts=True)
    _seed(s3)
    s3.objects[WHERE.key(MARKER)] = b'{"state": "done"}'
    plan, ups = plan_plain(s3, WHERE, "parquet"), _stage(s3, "w1", 1)
    del s3.objects[WHERE.key(MARKER)]  # someone removed it since
    with pytest.raises(WriteConflictError):
        commit_plain(s3, WHERE, "parquet", plan, ups, overwrite=True, write_id="w1")
    assert _data(s3) == OLD


def test_the_commit_reports_its_point_of_no_return_once_after_the_first_completion() -> None:
    from lakegate_client.engine.formats.plain import CommitTiming

    s3 = FakeS3()
    _seed(s3)
    plan, ups = plan_plain(s3, WHERE, "parquet"), _stage(s3, "w1", 2)
    seen: list[tuple[str, int]] = []
    timing = CommitTiming(on_step=lambda step: seen.append((step, len(s3.objects))))
    commit_plain(s3, WHERE, "parquet", plan, ups, overwrite=True, write_id="w1", timing=timing)
    # old files + marker + intent + the first new file
    assert seen == [("point_of_no_return", len(OLD) + 3)]


def _killed_overwrite_an_hour_ago(s3: FakeS3) -> None:
    """An overwrite whose driver died right after its first upload completion, an hour ago."""
    from lakegate_client.engine.formats.plain import CommitTiming

    _seed(s3)
    plan, ups = plan_plain(s3, WHERE, "parquet"), _stage(s3, "w1", 2)
    numbered = _overwrite_calls()
    n = [i for i, (op, _) in enumerate(numbered.calls, 1) if op == "CompleteMultipartUpload"][1]
    old_clock = CommitTiming(now=lambda: time.time() - 3600)
    with pytest.raises(Killed):
        commit_plain(s3.view(faults={n: Fault(kind="kill")}), WHERE, "parquet", plan, ups,
                     overwrite=True, write_id="w1", timing=old_clock)
    assert _data(s3) == sorted(OLD + _mine("w1", 1))  # torn, until someone touches it


def _creds(storage: str = "s3") -> Any:
    return type("C", (), {"location": "s3://b/wh/t1", "storage": storage})()


def test_a_reader_finishes_a_commit_whose_driver_died(monkeypatch: pytest.MonkeyPatch) -> None:
    from lakegate_client.engine.formats import plain as plain_format

    s3 = FakeS3()
    _killed_overwrite_an_hour_ago(s3)
    monkeypatch.setattr(s3_store, "s3_client", lambda _c: s3.view())
    assert plain_format.finish_abandoned_plain(_creds(), _creds) == 1
    assert _data(s3) == _mine("w1", 2)
    assert not [k for k in s3.objects if "_lakegate_intent-" in k]
    assert plain_format.finish_abandoned_plain(_creds(), _creds) == 0  # nothing left: one listing


def test_a_read_only_reader_reads_on_when_it_cannot_finish_a_commit(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture,
) -> None:
    from lakegate_client._errors import PermissionDeniedError
    from lakegate_client.engine.formats import plain as plain_format

    s3 = FakeS3()
    _killed_overwrite_an_hour_ago(s3)
    monkeypatch.setattr(s3_store, "s3_client", lambda _c: s3.view())

    def no_write_credential() -> Any:
        raise PermissionDeniedError("read only")

    assert plain_format.finish_abandoned_plain(_creds(), no_write_credential) == 0
    assert "could not finish an abandoned commit" in caplog.text
    # no store, no intents
    assert plain_format.finish_abandoned_plain(_creds("unknown"), _creds) == 0


def test_an_intent_put_retried_by_the_sdk_after_a_lost_answer_is_adopted() -> None:
    """botocore retries a 503: when the first PUT had landed, the retry meets If-None-Match."""

    class RetriedOnce(FakeS3):
        def put_object(self, **kw: Any) -> dict[str, Any]:
            answer = super().put_object(**kw)
            if "_lakegate_intent-" in kw["Key"] and "IfNoneMatch" in kw:
                return super().put_object(**kw)  # the retry of a lost answer: 412
            return answer

    s3 = RetriedOnce()
    _seed(s3)
    plan, ups = plan_plain(s3, WHERE, "parquet"), _stage(s3, "w1", 2)
    commit_plain(s3, WHERE, "parquet", plan, ups, overwrite=True, write_id="w1")
    assert _data(s3) == _mine("w1", 2)


def test_a_marker_put_retried_by_the_sdk_after_a_lost_answer_is_ours() -> None:
    class RetriedOnce(FakeS3):
        def put_object(self, **kw: Any) -> dict[str, Any]:
            answer = super().put_object(**kw)
            if kw["Key"].endswith(MARKER) and b"committing" in kw["Body"]:
                return super().put_object(**kw)  # the retry of a lost answer: 412
            return answer

    s3 = RetriedOnce()
    _seed(s3)
    plan, ups = plan_plain(s3, WHERE, "parquet"), _stage(s3, "w1", 2)
    commit_plain(s3, WHERE, "parquet", plan, ups, overwrite=True, write_id="w1")
    assert _data(s3) == _mine("w1", 2)


def test_a_reader_asks_for_no_write_credential_while_the_commit_is_alive() -> None:
    from lakegate_client.engine.formats.plain import CommitTiming, finish_abandoned

    s3 = FakeS3()
    _seed(s3)
    plan, ups = plan_plain(s3, WHERE, "parquet"), _stage(s3, "w1", 2)
    n = [i for i, (op, _) in enumerate(_overwrite_calls().calls, 1)
         if op == "CompleteMultipartUpload"][1]
    with pytest.raises(Killed):  # killed just now: its lease has a minute to run
        commit_plain(s3.view(faults={n: Fault(kind="kill")}), WHERE, "parquet", plan, ups,
                     overwrite=True, write_id="w1")

    def no_writer() -> Any:
        raise AssertionError("a live commit needs no recovery")

    assert finish_abandoned(s3.view(), WHERE, no_writer) == 0
    later = CommitTiming(now=lambda: time.time() + 3600)
    assert finish_abandoned(s3.view(), WHERE, s3.view, later) == 1
    assert _data(s3) == _mine("w1", 2)
