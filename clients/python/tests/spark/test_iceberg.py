"""Iceberg commits with an ambiguous answer are resolved from the table, never guessed
(lakegate_client/spark/iceberg.py: ``IcebergWriter.commit``, ``abort``)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

pa = pytest.importorskip("pyarrow")
pytest.importorskip("pyiceberg")
pytest.importorskip("pyspark")

from pyiceberg.exceptions import CommitStateUnknownException  # noqa: E402

from lakegate_client.spark import iceberg  # noqa: E402
from lakegate_client.spark.options import SourceOptions  # noqa: E402

from .iceberg_catalog import MemoryCatalog  # noqa: E402

SCHEMA = pa.schema([("id", pa.int64())])


class Job:
    """One writer on a table of the memory catalog, its tasks' files written locally."""

    def __init__(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, *,
                 overwrite: bool = False) -> None:
        import pyarrow.fs as pafs

        self.catalog = catalog = MemoryCatalog(f"file://{tmp_path}/wh")
        if ("ns", "t") not in catalog.tables:
            catalog.create_table(("ns", "t"), SCHEMA)
        (tmp_path / "wh" / "ns" / "t" / "data").mkdir(parents=True)  # an object store has no dirs
        creds = SimpleNamespace(storage="file", pyarrow_filesystem=pafs.LocalFileSystem)
        monkeypatch.setattr(iceberg, "load_table", lambda _opts: catalog.load_table(("ns", "t")))
        monkeypatch.setattr(iceberg, "node_credentials", lambda *_a, **_k: creds)
        monkeypatch.setattr(iceberg.time, "sleep", lambda _s: None)
        self.overwrite = overwrite

    def writer(self) -> iceberg.IcebergWriter:
        table = self.catalog.load_table(("ns", "t"))
        return iceberg.IcebergWriter(SourceOptions(("ns",), "t"), table, SCHEMA,  # type: ignore[arg-type]
                                     self.overwrite)

    def write(self, writer: iceberg.IcebergWriter, ids: list[int]) -> list[Any]:
        batches = pa.table({"id": ids}, schema=SCHEMA).to_batches()
        return [writer.write(iter(batches))]

    def rows(self) -> list[int]:
        table = self.catalog.load_table(("ns", "t"))
        return sorted(table.scan().to_arrow().column("id").to_pylist())

    def files(self, writer: iceberg.IcebergWriter) -> list[Path]:
        data = Path(writer._location.removeprefix("file://")) / "data"
        return sorted(data.glob(f"{writer._write_id}*"))


def answer_after_landing(error: BaseException, times: int = 1) -> Any:
    """A commit call that lands, then answers ``error`` (a lost 504 reply), ``times`` times."""
    left = [times]

    def fault(when: str) -> None:
        if when == "after" and left[0] > 0:
            left[0] -= 1
            raise error
    return fault


def test_an_ambiguous_commit_that_landed_is_reported_committed_and_keeps_its_files(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Regression: a 504 (CommitStateUnknownException) after the commit landed made the writer
    delete every data file of the write, which the new snapshot references, and fail."""
    job = Job(tmp_path, monkeypatch)
    writer = job.writer()
    messages = job.write(writer, [1, 2, 3])
    job.catalog.fault = answer_after_landing(CommitStateUnknownException("504 Gateway Timeout"))
    writer.commit(messages)
    assert job.catalog.commits == 1  # resolved from the table, not committed twice
    assert job.rows() == [1, 2, 3]
    assert len(job.files(writer)) == 1


def test_a_timeout_that_did_not_land_is_retried_once_resolved(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    job = Job(tmp_path, monkeypatch)
    writer = job.writer()
    messages = job.write(writer, [7])
    left = [1]

    def fault(when: str) -> None:
        if when == "before" and left[0]:
            left[0] -= 1
            raise TimeoutError("read timed out")
    job.catalog.fault = fault
    writer.commit(messages)
    assert job.rows() == [7]
    assert job.catalog.commits == 1


def test_an_undecidable_commit_keeps_every_file_and_abort_keeps_them(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The commit landed, every answer is a 502 and the table cannot be read afterwards: the
    job fails loudly (outcome unknown), and neither commit nor abort deletes a file."""
    job = Job(tmp_path, monkeypatch)
    writer = job.writer()
    messages = job.write(writer, [4, 5])
    catalog = job.catalog
    catalog.fault = answer_after_landing(CommitStateUnknownException("502"), times=99)
    real_load = catalog.load_table

    def load(ident: Any) -> Any:
        if catalog.commits:
            raise ConnectionError("connection reset")
        return real_load(ident)
    monkeypatch.setattr(catalog, "load_table", load)
    with pytest.raises(iceberg.CommitUnknownError, match="KEPT"):
        writer.commit(messages)
    writer.abort(messages)
    assert len(job.files(writer)) == 1
    monkeypatch.setattr(catalog, "load_table", real_load)
    assert job.rows() == [4, 5]  # the snapshot references the file: nothing was torn


def test_abort_after_a_landed_commit_keeps_the_files(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Spark calls abort when commit raised, whatever happened inside: abort deletes only
    files it proves unreferenced."""
    job = Job(tmp_path, monkeypatch, overwrite=True)
    writer = job.writer()
    messages = job.write(writer, [9])
    writer.commit(messages)
    writer.abort(messages)
    assert job.rows() == [9]
    assert len(job.files(writer)) == 1


def test_a_clear_refusal_deletes_the_files(tmp_path: Path,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    from pyiceberg.exceptions import ForbiddenError

    job = Job(tmp_path, monkeypatch)
    writer = job.writer()
    messages = job.write(writer, [1])

    def fault(when: str) -> None:
        if when == "before":
            raise ForbiddenError("403")
    job.catalog.fault = fault
    with pytest.raises(ForbiddenError):
        writer.commit(messages)
    writer.abort(messages)
    assert job.files(writer) == []
    assert job.rows() == []


def test_a_staged_commit_does_not_list_the_data_folder_afterwards(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """On S3 the completed uploads are the job's only visible files (failed and duplicate
    attempts' uploads are never completed): listing ``data/`` after each commit, which grows
    with every write, found nothing to remove (issue 36)."""
    from lakegate_client.engine.stores.base import PendingUpload

    job = Job(tmp_path, monkeypatch)
    writer = job.writer()
    calls: list[str] = []
    monkeypatch.setattr(iceberg, "s3_client", lambda _creds: "s3")
    monkeypatch.setattr(iceberg, "complete_uploads", lambda *_a, **_k: calls.append("complete"))
    monkeypatch.setattr(writer, "_commit_resolved",
                        lambda _paths, _intent=None: calls.append("commit"))
    monkeypatch.setattr(writer, "_drop_files", lambda *_a, **_k: calls.append("list data/"))
    path = f"{writer._location}/data/{writer._write_id}-a.parquet"
    upload = PendingUpload(path.split("/", 3)[-1], "u-1", ((1, '"e"'),), 10)
    writer.commit([iceberg.IcebergFiles(paths=(path,), uploads=(upload,))])
    assert calls == ["complete", "commit"]


def test_abort_after_an_ambiguous_commit_keeps_the_files_until_the_recovery_decides(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 50 item 4 ("ambiguous means keep"): every commit call answers 504 while the
    catalog keeps working (an attempt may still be in flight); the writer says its files are
    kept, then Spark's abort read the table once, saw no snapshot and deleted them, so an
    attempt landing later would reference deleted files. Now the job's intent says the outcome
    is unknown, the abort keeps files and intent, and the recovery decides from the table once
    the lease and commit bound ran out."""
    import time

    from lakegate_client.engine import jobs
    from lakegate_client.engine.job_intent import JOB_PREFIX, JobTiming
    from lakegate_client.engine.stores.base import S3Location

    from ..engine.stores.fake_s3 import FakeS3

    job = Job(tmp_path, monkeypatch)
    s3, where = FakeS3(), S3Location("b", "wh/ns/t")
    monkeypatch.setattr(jobs, "job_store", lambda _c: (s3, where))
    monkeypatch.setattr(iceberg, "job_store", lambda _c: (s3, where))
    table = job.catalog.load_table(("ns", "t"))
    writer = iceberg.IcebergWriter(SourceOptions(("ns",), "t"), table, SCHEMA,  # type: ignore[arg-type]
                                   False, job=True)
    long_ago = JobTiming(now=lambda: time.time() - 3_600)  # a driver that died an hour ago
    jobs.job_of(object(), writer._write_id, long_ago).create("iceberg", staged=False)
    messages = job.write(writer, [8, 9])

    def in_flight(when: str) -> None:
        if when == "before":
            raise CommitStateUnknownException("504 Gateway Timeout")
    job.catalog.fault = in_flight
    with pytest.raises(iceberg.CommitUnknownError, match="KEPT"):
        writer.commit(messages)
    writer.abort(messages)  # Spark's abort: the table shows no snapshot of the write (yet)
    assert len(job.files(writer)) == 1
    assert [k for k in s3.objects if JOB_PREFIX in k]  # the intent stays, for the recovery
    job.catalog.fault = None
    later = JobTiming(now=lambda: time.time() + 3_600)  # past the lease and the commit bound
    assert iceberg.recover_iceberg_jobs(SourceOptions(("ns",), "t"),  # type: ignore[arg-type]
                                        writer._location, reading=False, timing=later) == 1
    assert job.files(writer) == []  # no snapshot names the write: its files go
    assert not [k for k in s3.objects if JOB_PREFIX in k]
    assert job.rows() == []
