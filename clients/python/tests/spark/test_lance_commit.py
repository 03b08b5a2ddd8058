"""Lance commits whose call failed are resolved from the versions, never guessed
(lakegate_client/spark/committer.py: ``commit_lance``, ``drop_lance_fragments``)."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

lance = pytest.importorskip("lance")
pa = pytest.importorskip("pyarrow")

from lakegate_client.spark import committer  # noqa: E402

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
    committer.commit_lance(creds, SCHEMA, frags, overwrite=overwrite, read_version=1,
                           write_id=write_id)
    monkeypatch.undo()
    assert rows(tmp_path) == ([] if overwrite else [0]) + [1, 2]
    committer.drop_lance_fragments(creds, frags, write_id, since=1)  # were abort called anyway
    assert rows(tmp_path) == ([] if overwrite else [0]) + [1, 2]


def test_an_undecidable_commit_keeps_its_files(tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    lance.write_dataset(pa.table({"id": [0]}, schema=SCHEMA), str(tmp_path))
    creds, write_id = local_creds(tmp_path), uuid.uuid4().hex
    frags = fragments(tmp_path, [3])
    lands_then_fails(monkeypatch, TimeoutError("timed out"))
    monkeypatch.setattr(committer, "lance_committed", lambda *_a, **_k: None)
    with pytest.raises(committer.CommitUnknownError, match="KEPT"):
        committer.commit_lance(creds, SCHEMA, frags, overwrite=False, read_version=1,
                               write_id=write_id)
    committer.drop_lance_fragments(creds, frags, write_id, since=1)  # abort: still undecided
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
        committer.commit_lance(creds, SCHEMA, frags, overwrite=False, read_version=1,
                               write_id=write_id)
    monkeypatch.undo()
    committer.drop_lance_fragments(creds, frags, write_id, since=1)
    assert rows(tmp_path) == [0]
    assert not any((tmp_path / f).exists() for f in committer.lance_files(frags))
