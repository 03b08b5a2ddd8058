"""Delta commits whose call failed are resolved from the log, never guessed
(lakegate_client/engine/: ``publish_delta``, ``discard_delta``)."""

from __future__ import annotations

import uuid
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

pa = pytest.importorskip("pyarrow")
deltalake = pytest.importorskip("deltalake")
pytest.importorskip("pyspark")

from lakegate_client.engine import protocol  # noqa: E402
from lakegate_client.engine.formats import delta as delta_format  # noqa: E402
from lakegate_client.spark import writer  # noqa: E402
from lakegate_client.tables.directory import new_data_file  # noqa: E402

SCHEMA = pa.schema([("id", pa.int64())])


def local_creds(location: Path) -> Any:
    import pyarrow.fs as pafs

    return SimpleNamespace(location=str(location), storage="file",
                           pyarrow_filesystem=pafs.LocalFileSystem,
                           delta_storage_options=dict)


def write_file(location: Path, write_id: str, ids: list[int]) -> Any:
    import pyarrow.parquet as pq

    rel = new_data_file(write_id, 0, "parquet")
    pq.write_table(pa.table({"id": ids}, schema=SCHEMA), location / rel)
    return writer.WrittenFile(rel, (location / rel).stat().st_size, len(ids), 0)


def rows(location: Path) -> list[int]:
    return sorted(deltalake.DeltaTable(str(location)).to_pyarrow_table().column("id").to_pylist())


def lands_then_fails(monkeypatch: pytest.MonkeyPatch, error: BaseException) -> None:
    """The commit call lands, then its answer is lost (a timeout, a 5xx)."""
    real = delta_format.delta_commit

    def commit(*args: Any, **kwargs: Any) -> None:
        real(*args, **kwargs)
        raise error
    monkeypatch.setattr(delta_format, "delta_commit", commit)


@pytest.mark.parametrize("existing", [False, True], ids=["create", "append"])
def test_a_commit_that_landed_but_failed_is_reported_committed(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, existing: bool) -> None:
    """Regression: an error after the Delta commit landed made publish_delta delete the files
    the log had just committed (a table whose reads fail) and report the job failed."""
    creds = local_creds(tmp_path)
    if existing:
        deltalake.write_deltalake(str(tmp_path), pa.table({"id": [0]}, schema=SCHEMA))
    write_id = uuid.uuid4().hex
    files = [write_file(tmp_path, write_id, [1, 2])]
    lands_then_fails(monkeypatch, TimeoutError("the answer timed out"))
    delta_format.publish_delta(creds, SCHEMA, files, [], overwrite=False, write_id=write_id)
    assert rows(tmp_path) == ([0] if existing else []) + [1, 2]


def test_an_unreadable_log_after_a_failed_commit_keeps_the_files(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    creds = local_creds(tmp_path)
    write_id = uuid.uuid4().hex
    files = [write_file(tmp_path, write_id, [3])]
    lands_then_fails(monkeypatch, OSError("503 Slow Down"))
    monkeypatch.setattr(delta_format, "delta_committed", lambda *_a: None)
    with pytest.raises(protocol.CommitUnknownError, match="KEPT"):
        delta_format.publish_delta(creds, SCHEMA, files, [], overwrite=False, write_id=write_id)
    delta_format.discard_delta(creds, write_id)  # Spark's abort: the log still cannot answer
    assert (tmp_path / files[0].path).exists()
    monkeypatch.undo()
    assert rows(tmp_path) == [3]


def test_a_commit_that_did_not_land_deletes_its_files(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    creds = local_creds(tmp_path)
    write_id = uuid.uuid4().hex
    files = [write_file(tmp_path, write_id, [3])]

    def refused(*_a: Any, **_k: Any) -> None:
        raise PermissionError("403")
    monkeypatch.setattr(delta_format, "delta_commit", refused)
    with pytest.raises(PermissionError):
        delta_format.publish_delta(creds, SCHEMA, files, [], overwrite=False, write_id=write_id)
    assert not (tmp_path / files[0].path).exists()


def test_abort_after_a_landed_commit_keeps_the_files(tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """Regression: Spark calls abort whenever commit raised; abort deleted every file of the
    write, also those the Delta log references."""
    creds = local_creds(tmp_path)
    write_id = uuid.uuid4().hex
    files = [write_file(tmp_path, write_id, [5, 6])]
    delta_format.publish_delta(creds, SCHEMA, files, [], overwrite=True, write_id=write_id)
    opts = SimpleNamespace(freeze_worker_heap=False)
    plan = writer.WritePlan(opts=opts, info=SimpleNamespace(format="delta",  # type: ignore[arg-type]
                                                            location=str(tmp_path)),
                            overwrite=True, write_id=write_id, read_version=None)
    monkeypatch.setattr(writer, "table_credentials", lambda *_a: creds)
    writer.LakekeeperWriter(plan, SCHEMA).abort([])
    assert rows(tmp_path) == [5, 6]


def test_abort_of_an_uncommitted_write_deletes_its_files(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    creds = local_creds(tmp_path)
    deltalake.write_deltalake(str(tmp_path), pa.table({"id": [0]}, schema=SCHEMA))
    write_id = uuid.uuid4().hex
    files = [write_file(tmp_path, write_id, [5])]
    delta_format.discard_delta(creds, write_id)
    assert not (tmp_path / files[0].path).exists()
    assert rows(tmp_path) == [0]


def test_abort_after_an_ambiguous_commit_keeps_the_files_until_the_recovery_decides(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 50 item 4, "ambiguous means keep": the commit's outcome could not be read (it
    raised CommitUnknownError, files KEPT); Spark's abort then read the log once, saw no commit
    (a lagging read, or the call still in flight) and deleted the files the commit may yet
    reference. Now the job's intent says the outcome is unknown, the abort keeps the files and
    the intent, and the recovery decides from the log once the lease and commit bound ran out."""
    import time

    from lakegate_client.engine import jobs
    from lakegate_client.engine.formats import protocol_for
    from lakegate_client.engine.job_intent import JOB_PREFIX, JobTiming
    from lakegate_client.engine.stores.base import S3Location

    from ..stores.fake_s3 import FakeS3

    creds, s3, where = local_creds(tmp_path), FakeS3(), S3Location("b", "wh/t")
    monkeypatch.setattr(jobs, "job_store", lambda _c: (s3, where))
    write_id = uuid.uuid4().hex
    long_ago = JobTiming(now=lambda: time.time() - 3_600)  # a driver that died an hour ago
    seen = jobs.job_of(creds, write_id, long_ago).create("delta", staged=False)
    files = [write_file(tmp_path, write_id, [7])]

    def no_answer(*_a: Any, **_k: Any) -> None:
        raise TimeoutError("the commit call got no answer")
    monkeypatch.setattr(delta_format, "_delta_transaction", no_answer)
    monkeypatch.setattr(delta_format, "delta_committed", lambda *_a: None)  # log unreadable
    with pytest.raises(protocol.CommitUnknownError, match="KEPT"):
        delta_format.publish_delta(creds, SCHEMA, files, [], overwrite=False, write_id=write_id,
                                   intent=jobs.job_of(creds, write_id, long_ago), seen=seen)
    monkeypatch.setattr(delta_format, "delta_committed", lambda *_a: False)  # a lagging read
    delta_format.discard_delta(creds, write_id, jobs.job_of(creds, write_id))  # Spark's abort
    assert (tmp_path / files[0].path).exists()
    assert [k for k in s3.objects if JOB_PREFIX in k]  # the intent stays, for the recovery
    monkeypatch.undo()
    monkeypatch.setattr(jobs, "job_store", lambda _c: (s3, where))
    assert protocol_for("delta").recover(creds) == 1  # the log shows no commit: files go
    assert not (tmp_path / files[0].path).exists()
    assert not [k for k in s3.objects if JOB_PREFIX in k]
