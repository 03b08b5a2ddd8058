"""Cleanups after a durable commit never raise: Spark would call abort, which deletes the job's
files, committed ones included (lakegate_client/engine/: ``after_commit``)."""

from __future__ import annotations

import logging
from types import SimpleNamespace
from typing import Any

import pytest

from lakegate_client.engine import job_files, staged, stores

pytest.importorskip("pyarrow")


def test_a_failing_cleanup_is_logged_not_raised(caplog: pytest.LogCaptureFixture) -> None:
    from lakegate_client.engine.retrying import after_commit

    def broken() -> None:
        raise OSError("throttled")

    with caplog.at_level(logging.WARNING):
        after_commit("the upload sweep", "w-1", broken)
    assert "after the commit of write w-1, the upload sweep failed" in caplog.text
    ran: list[str] = []
    after_commit("removing unused files", "w-2", lambda: ran.append("ok"))
    assert ran == ["ok"]


def test_delta_publish_succeeds_when_its_cleanup_fails(monkeypatch: pytest.MonkeyPatch) -> None:
    """Regression guard: the cleanup's error used to escape commit(), and abort then deleted
    the files the Delta log had just committed."""
    from lakegate_client.engine import retrying
    from lakegate_client.engine.formats import delta as delta_format

    committed: list[bool] = []
    dropped: list[tuple[str, ...]] = []

    def transaction(*_a: Any, **_k: Any) -> None:
        committed.append(True)

    def drop(_creds: Any, _write_id: str, keep: Any) -> list[str]:
        dropped.append(tuple(keep))
        raise OSError("the listing failed")

    monkeypatch.setattr(delta_format, "_delta_transaction", transaction)
    monkeypatch.setattr(retrying.time, "sleep", lambda _s: None)
    monkeypatch.setattr(job_files, "drop_job_files", drop)
    creds = SimpleNamespace(location="s3://bucket/tables/t")
    files = [SimpleNamespace(path="part-w-1.parquet")]
    delta_format.publish_delta(creds, None, files, [], overwrite=False, write_id="w")  # type: ignore[arg-type]
    assert committed == [True]
    assert dropped == [("part-w-1.parquet",)] * retrying.RETRIES  # tried, failed, not raised


def test_a_cleanup_that_fails_once_is_retried(monkeypatch: pytest.MonkeyPatch) -> None:
    """After the point of no return every step is retried before it is given up (logged)."""
    from lakegate_client.engine import retrying

    monkeypatch.setattr(retrying.time, "sleep", lambda _s: None)
    tries: list[int] = []

    def flaky() -> None:
        tries.append(1)
        if len(tries) == 1:
            raise OSError("503 Slow Down")

    retrying.after_commit("removing unused files", "w", flaky)
    assert len(tries) == 2


def test_a_staged_delta_commit_does_not_list_the_table_afterwards(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """On S3 tasks stage uploads that only the commit completes, so the completed uploads are
    the job's only visible files. Listing the whole table after each commit (a LIST per 1,000
    files, growing with the table) to remove the job's other files found none (issue 36)."""
    from lakegate_client.engine.formats import delta as delta_format
    from lakegate_client.engine.stores.base import PendingUpload

    calls: list[str] = []
    monkeypatch.setattr(stores, "table_store", lambda _creds: "s3")
    monkeypatch.setattr(delta_format, "complete_uploads",
                        lambda *_a, **_k: calls.append("complete"))
    monkeypatch.setattr(delta_format, "_delta_transaction",
                        lambda *_a, **_k: calls.append("commit"))
    monkeypatch.setattr(staged, "sweep", lambda *_a, **_k: calls.append("sweep") or 0)
    monkeypatch.setattr(job_files, "drop_job_files",
                        lambda *_a, **_k: calls.append("list the table") or [])
    creds = SimpleNamespace(location="s3://bucket/tables/t")
    upload = PendingUpload("tables/t/part-w-00000-a.parquet", "u-1", ((1, '"e"'),), 10)
    files = [SimpleNamespace(path="part-w-00000-a.parquet")]
    delta_format.publish_delta(creds, None, files, [upload], overwrite=False, write_id="w")  # type: ignore[arg-type]
    assert calls == ["complete", "commit", "sweep"]
