"""Lance commits whose call failed are resolved from the versions, never guessed
(lakegate_client/engine/: ``commit_lance``, ``drop_lance_fragments``)."""

from __future__ import annotations

import json
import time
import uuid
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

lance = pytest.importorskip("lance")
pa = pytest.importorskip("pyarrow")

from lakegate_client.engine import job_files, jobs, protocol, retrying, stores  # noqa: E402
from lakegate_client.engine.formats import lance as lance_format  # noqa: E402
from lakegate_client.engine.formats import protocol_for  # noqa: E402

SCHEMA = pa.schema([("id", pa.int64())])


def local_creds(location: Path) -> Any:
    import pyarrow.fs as pafs

    return SimpleNamespace(location=str(location), storage="file", lance_storage_options=dict,
                           pyarrow_filesystem=pafs.LocalFileSystem)


def fragments(location: Path, ids: list[int]) -> list[str]:
    from lance.fragment import write_fragments

    written = write_fragments(pa.table({"id": ids}, schema=SCHEMA), str(location), schema=SCHEMA)
    return [json.dumps(f.to_json()) for f in written]


def rows(location: Path) -> list[int]:
    return sorted(lance.dataset(str(location)).to_table().column("id").to_pylist())


def lands_then_fails(monkeypatch: pytest.MonkeyPatch, error: BaseException) -> None:
    """The commit call lands, then its answer is lost (a timeout, a 5xx)."""
    real = lance.LanceDataset.commit

    def commit(*args: Any, **kwargs: Any) -> Any:
        real(*args, **kwargs)
        raise error
    monkeypatch.setattr(lance.LanceDataset, "commit", staticmethod(commit))


@pytest.mark.parametrize("overwrite", [False, True], ids=["append", "overwrite"])
def test_a_commit_that_landed_but_failed_is_reported_committed(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, overwrite: bool) -> None:
    """Regression: an error after the Lance commit landed failed the job, and Spark's abort then
    deleted the fragment files the new version references (a dataset whose reads fail)."""
    lance.write_dataset(pa.table({"id": [0]}, schema=SCHEMA), str(tmp_path))
    creds, write_id = local_creds(tmp_path), uuid.uuid4().hex
    frags = fragments(tmp_path, [1, 2])
    lands_then_fails(monkeypatch, OSError("503 Slow Down"))
    lance_format.commit_lance(creds, SCHEMA, frags, overwrite=overwrite, read_version=1,
                              write_id=write_id)
    monkeypatch.undo()
    assert rows(tmp_path) == ([] if overwrite else [0]) + [1, 2]
    lance_format.drop_lance_fragments(creds, frags, write_id, since=1)  # were abort called anyway
    assert rows(tmp_path) == ([] if overwrite else [0]) + [1, 2]


def test_an_undecidable_commit_keeps_its_files(tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    lance.write_dataset(pa.table({"id": [0]}, schema=SCHEMA), str(tmp_path))
    creds, write_id = local_creds(tmp_path), uuid.uuid4().hex
    frags = fragments(tmp_path, [3])
    lands_then_fails(monkeypatch, TimeoutError("timed out"))
    monkeypatch.setattr(lance_format, "lance_committed", lambda *_a, **_k: None)
    with pytest.raises(protocol.CommitUnknownError, match="KEPT"):
        lance_format.commit_lance(creds, SCHEMA, frags, overwrite=False, read_version=1,
                                  write_id=write_id)
    lance_format.drop_lance_fragments(creds, frags, write_id, since=1)  # abort: still undecided
    monkeypatch.undo()
    assert rows(tmp_path) == [0, 3]


def test_a_commit_that_did_not_land_is_aborted_clean(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    lance.write_dataset(pa.table({"id": [0]}, schema=SCHEMA), str(tmp_path))
    creds, write_id = local_creds(tmp_path), uuid.uuid4().hex
    frags = fragments(tmp_path, [3])

    def refused(*_a: Any, **_k: Any) -> Any:
        raise PermissionError("403")
    monkeypatch.setattr(lance.LanceDataset, "commit", staticmethod(refused))
    with pytest.raises(PermissionError):
        lance_format.commit_lance(creds, SCHEMA, frags, overwrite=False, read_version=1,
                                  write_id=write_id)
    monkeypatch.undo()
    lance_format.drop_lance_fragments(creds, frags, write_id, since=1)
    assert rows(tmp_path) == [0]
    assert not any((tmp_path / f).exists() for f in lance_format.lance_files(frags))


def _ledgered(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Any, Any]:
    """A local dataset whose attempt ledger is on a fake S3 (as on S3, ADLS, GCS)."""
    from lakegate_client.engine.stores.base import S3Location

    from ..stores.fake_s3 import FakeS3

    s3, where = FakeS3(), S3Location("b", "wh/ds")
    monkeypatch.setattr(lance_format, "lance_ledger", lambda _creds: (s3, where))
    return s3, where


def _checked_in(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                ids: list[int]) -> tuple[Any, str, list[str], str]:
    """A dataset of row 0 and a job whose one task wrote ``ids`` and checked in: the ledger's
    store, the write id, the fragments and the task's record."""
    from lakegate_client.engine import attempts

    lance.write_dataset(pa.table({"id": [0]}, schema=SCHEMA), str(tmp_path))
    s3, where = _ledgered(tmp_path, monkeypatch)
    write_id = uuid.uuid4().hex
    frags = fragments(tmp_path, ids)
    return s3, write_id, frags, attempts.check_in(s3, where, write_id, 0, 0,
                                                  lance_format.lance_files(frags))


def test_the_ledger_cleanup_overlaps_the_commit_call(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 36: once the job is closed its records' deletes need not wait for the commit; the
    commit call here only returns once it saw them go (a sequential cleanup times it out)."""
    import threading

    from lakegate_client.engine import attempts

    s3, write_id, frags, record = _checked_in(tmp_path, monkeypatch, [1, 2])
    cleaned, real = threading.Event(), attempts.discard_unused

    def discard(*args: Any, **kwargs: Any) -> list[str]:
        out = real(*args, **kwargs)
        cleaned.set()
        return out
    monkeypatch.setattr(attempts, "discard_unused", discard)
    real_commit = lance.LanceDataset.commit

    def commit(*args: Any, **kwargs: Any) -> Any:
        assert cleaned.wait(5), "the ledger cleanup waited for the commit call"
        return real_commit(*args, **kwargs)
    monkeypatch.setattr(lance.LanceDataset, "commit", staticmethod(commit))
    lance_format.commit_lance(local_creds(tmp_path), SCHEMA, frags, overwrite=False,
                              read_version=1, write_id=write_id, records=[record])
    assert rows(tmp_path) == [0, 1, 2]
    assert not [k for k in s3.objects if f"/{write_id}/" in k]  # the record is gone


def test_a_failed_commit_still_waits_for_the_cleanup_and_raises_its_own_error(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    s3, write_id, frags, record = _checked_in(tmp_path, monkeypatch, [1])

    def refused(*_a: Any, **_k: Any) -> Any:
        raise PermissionError("403 refused")
    monkeypatch.setattr(lance.LanceDataset, "commit", staticmethod(refused))
    with pytest.raises(PermissionError, match="403"):
        lance_format.commit_lance(local_creds(tmp_path), SCHEMA, frags, overwrite=False,
                                  read_version=1, write_id=write_id, records=[record])
    assert not [k for k in s3.objects if f"/{write_id}/" in k]  # the cleanup had finished
    assert rows(tmp_path) == [0]


def test_a_ledger_cleanup_that_fails_during_the_commit_keeps_the_intent_for_recovery(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The cleanup runs alongside the commit call, which may land meanwhile: its failure must
    not fail a job whose rows are in (Spark's abort, a retry, duplicate rows). Nor may the job's
    intent go with the cleanup undone: once an intent is gone, the next cleanup sweeps what its
    job's records name (``attempts.sweep_ended``), and these name the files the commit used.
    The intent stays; the recovery of a later write finishes the cleanup, then removes it."""
    from lakegate_client.engine import attempts
    from lakegate_client.engine.job_intent import JOB_PREFIX, JobIntent, JobTiming

    s3, write_id, frags, record = _checked_in(tmp_path, monkeypatch, [1])
    where = lance_format.lance_ledger(None)[1]
    intent = JobIntent(s3, where, write_id)
    intent.create("lance", read_version=1)
    real = attempts.discard_unused

    def refused(*_a: Any, **_k: Any) -> None:
        raise OSError("503 SlowDown")
    monkeypatch.setattr(attempts, "discard_unused", refused)
    monkeypatch.setattr(retrying.time, "sleep", lambda _s: None)
    lance_format.commit_lance(local_creds(tmp_path), SCHEMA, frags, overwrite=False,
                              read_version=1, write_id=write_id, intent=intent, records=[record])
    assert rows(tmp_path) == [0, 1]
    assert [k for k in s3.objects if JOB_PREFIX in k]  # kept: the cleanup is not done
    assert where.key(record) in s3.objects
    monkeypatch.setattr(attempts, "discard_unused", real)
    later = JobTiming(now=lambda: __import__("time").time() + 3_600, sleep=lambda _s: None)
    monkeypatch.setattr(jobs, "job_store", lambda _c: (s3, where))
    assert protocol_for("lance").recover(local_creds(tmp_path), later) == 1
    assert not [k for k in s3.objects if JOB_PREFIX in k or f"/{write_id}/" in k]
    assert rows(tmp_path) == [0, 1]


def test_an_abort_after_a_landed_commit_finishes_its_cleanup_before_the_intent_goes(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Spark may abort a job whose commit landed (the commit raised after it). The abort keeps
    every file the commit used, and removes the ledger's records before the intent: a record
    left without an intent would be swept, with the files the commit uses."""
    from lakegate_client.engine import attempts
    from lakegate_client.engine.job_intent import JOB_PREFIX, JobIntent

    s3, write_id, frags, record = _checked_in(tmp_path, monkeypatch, [1])
    where = lance_format.lance_ledger(None)[1]
    copy = fragments(tmp_path, [1])  # a speculative duplicate's, never committed
    attempts.check_in(s3, where, write_id, 0, 1, lance_format.lance_files(copy))
    JobIntent(s3, where, write_id).create("lance", read_version=1)
    monkeypatch.setattr(jobs, "job_store", lambda _c: (s3, where))
    monkeypatch.setattr(job_files, "delete_under",
                        lambda _c, _b, rel: [(tmp_path / r).unlink(missing_ok=True) for r in rel])
    monkeypatch.setattr(s3, "removed", lambda key: (tmp_path / where.relative(key)).unlink(
        missing_ok=True))
    lance_format.commit_lance(local_creds(tmp_path), SCHEMA, frags, overwrite=False,
                              read_version=1, write_id=write_id, records=[record])  # no intent yet
    attempts.check_in(s3, where, write_id, 0, 2, lance_format.lance_files(copy))  # a late copy
    lance_format.drop_lance_fragments(local_creds(tmp_path), frags, write_id, since=1,
                                      with_intent=True)
    assert rows(tmp_path) == [0, 1]
    assert not [k for k in s3.objects if JOB_PREFIX in k or f"/{write_id}/" in k]
    assert not any((tmp_path / f).exists() for f in lance_format.lance_files(copy))


def _store_creds() -> Any:
    return SimpleNamespace(location="s3://b/wh/t1", storage="s3", lance_storage_options=dict)


def test_the_version_on_a_store_comes_from_the_manifest_listing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from lakegate_client.engine.formats.lance_manifests import U64_MAX
    from lakegate_client.engine.stores.s3 import S3Store

    from ..stores.fake_s3 import FakeS3

    store = S3Store(FakeS3(), "b")
    for version in (1, 2, 3):
        store.put(f"wh/t1/_versions/{U64_MAX - version:020}.manifest", b"")
    store.client.calls.clear()
    monkeypatch.setattr(stores, "table_store", lambda _c: store)

    def opened(*_a: Any) -> int:
        raise AssertionError("the dataset was opened")
    monkeypatch.setattr(lance_format, "_dataset_version", opened)
    assert lance_format.lance_version(_store_creds()) == 3
    assert store.client.calls == [("ListObjectsV2", "wh/t1/_versions/")]


@pytest.mark.parametrize("listing", ["fails", "shows no manifest", "not a store"])
def test_the_version_falls_back_to_opening_the_dataset(
    monkeypatch: pytest.MonkeyPatch, listing: str,
) -> None:
    from lakegate_client.engine.stores.s3 import S3Store

    from ..stores.fake_s3 import FakeS3, Fault

    s3 = FakeS3(faults={1: Fault(code="SlowDown", status=503)} if listing == "fails" else None)
    monkeypatch.setattr(stores, "table_store", lambda _c: S3Store(s3, "b"))
    opened: list[str] = []
    monkeypatch.setattr(lance_format, "_dataset_version",
                        lambda location, _o: opened.append(location) or 7)
    creds = _store_creds()
    if listing == "not a store":
        creds.storage = "file"
    assert lance_format.lance_version(creds) == 7
    assert opened == ["s3://b/wh/t1"]
    assert len(s3.calls) == (0 if listing == "not a store" else 1)


def test_abort_after_an_ambiguous_commit_keeps_the_fragments_until_the_recovery_decides(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 50 item 4 ("ambiguous means keep"), Lance: after a commit whose outcome could not
    be read, Spark's abort read the versions once, saw no commit and deleted the fragment files
    a late-landing commit would reference. Now they stay with the intent (marked unknown) until
    the recovery, once the lease and commit bound ran out, reads the versions."""
    from lakegate_client.engine.formats import protocol_for
    from lakegate_client.engine.job_intent import JOB_PREFIX, JobTiming
    from lakegate_client.engine.stores.base import S3Location

    from ..stores.fake_s3 import FakeS3

    lance.write_dataset(pa.table({"id": [0]}, schema=SCHEMA), str(tmp_path))
    creds, write_id = local_creds(tmp_path), uuid.uuid4().hex
    s3, where = FakeS3(), S3Location("b", "wh/ds")
    monkeypatch.setattr(jobs, "job_store", lambda _c: (s3, where))
    long_ago = JobTiming(now=lambda: time.time() - 3_600)  # a driver that died an hour ago
    seen = jobs.job_of(creds, write_id, long_ago).create("lance", staged=False, read_version=1)
    frags = fragments(tmp_path, [3])

    def no_answer(*_a: Any, **_k: Any) -> Any:
        raise TimeoutError("the commit call got no answer")
    monkeypatch.setattr(lance.LanceDataset, "commit", staticmethod(no_answer))
    monkeypatch.setattr(lance_format, "lance_committed", lambda *_a, **_k: None)
    with pytest.raises(protocol.CommitUnknownError, match="KEPT"):
        lance_format.commit_lance(creds, SCHEMA, frags, overwrite=False, read_version=1,
                                  write_id=write_id, seen=seen,
                                  intent=jobs.job_of(creds, write_id, long_ago))
    monkeypatch.setattr(lance_format, "lance_committed", lambda *_a, **_k: False)  # lagging
    lance_format.drop_lance_fragments(creds, frags, write_id, since=1, with_intent=True)
    assert all((tmp_path / f).exists() for f in lance_format.lance_files(frags))
    assert [k for k in s3.objects if JOB_PREFIX in k]
    monkeypatch.undo()
    monkeypatch.setattr(jobs, "job_store", lambda _c: (s3, where))
    assert protocol_for("lance").recover(creds) == 1  # no version carries the write: files go
    assert not any((tmp_path / f).exists() for f in lance_format.lance_files(frags))
    assert rows(tmp_path) == [0]
