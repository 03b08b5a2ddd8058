"""Spark writes to a plain table on ADLS run S3's protocol (issue 34): the plan stages tasks'
files as uncommitted blocks after the conditional-writes probe, the commit publishes them under
the marker/intent protocol, an overwrite planned against a stale table conflicts, and a failed
job leaves nothing visible. Used to be: tasks wrote visible files, no conflict check."""

from __future__ import annotations

from typing import Any

import pytest

from lakegate_client.engine.staged import stage_parquet

from ..engine.stores.fake_adls import FakeAdls
from .adls_planning import WHERE, adls_creds, plan_adls_write

pytest.importorskip("pyspark")


def _writer(monkeypatch: pytest.MonkeyPatch, store: FakeAdls, overwrite: bool,
            fmt: str = "parquet") -> Any:
    from pyspark.sql.types import LongType, StructField, StructType

    return plan_adls_write(monkeypatch, store, StructType([StructField("id", LongType())]),
                           overwrite, fmt)


def _stage(store: FakeAdls, write_id: str, n: int) -> Any:
    import pyarrow as pa

    from lakegate_client.spark.writer import TaskResult

    schema = pa.schema([("id", pa.int64())])
    rel = f"part-{write_id}-{n:05d}-x.parquet"
    batch = pa.record_batch([pa.array([n])], schema=schema)
    upload = stage_parquet(store, WHERE.bucket, WHERE.key(rel), schema, [batch])
    return TaskResult(partition=n, uploads=(upload,), rows=1)


def _data(store: FakeAdls) -> list[str]:
    return sorted(WHERE.relative(k) for k in store.objects if k.endswith(".parquet"))


def test_a_plain_write_on_adls_is_staged_and_planned_after_the_probe(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    store = FakeAdls()
    writer = _writer(monkeypatch, store, overwrite=True)
    assert writer._plan.staged
    assert writer._plan.plain is not None
    # the probe: a conditional PUT, its listing, three more conditional PUTs
    assert [op for op, _ in store.calls][:5] == ["PutBlob", "ListBlobs", *["PutBlob"] * 3]
    assert store.objects == {}  # the probe cleaned up after itself


def test_a_staged_file_is_invisible_until_the_commit_and_a_stale_overwrite_conflicts(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from lakegate_client.engine.formats.plain import WriteConflictError

    store = FakeAdls()
    first = _writer(monkeypatch, store, overwrite=True)
    second = _writer(monkeypatch, store, overwrite=True)  # planned against the same table
    mine = [_stage(store, first._plan.write_id, n) for n in range(2)]
    assert _data(store) == []  # uncommitted blocks: nothing a reader can see
    first.commit(mine)
    assert _data(store) == sorted(f"part-{first._plan.write_id}-{n:05d}-x.parquet"
                                  for n in range(2))
    theirs = [_stage(store, second._plan.write_id, 0)]
    with pytest.raises(WriteConflictError):
        second.commit(theirs)
    second.abort(theirs)
    assert _data(store) == sorted(f"part-{first._plan.write_id}-{n:05d}-x.parquet"
                                  for n in range(2))
    assert not [k for k in store.objects if "_lakegate_intent-" in k]


def test_a_failed_job_leaves_no_visible_file(monkeypatch: pytest.MonkeyPatch) -> None:
    store = FakeAdls()
    writer = _writer(monkeypatch, store, overwrite=False)
    staged = [_stage(store, writer._plan.write_id, n) for n in range(3)]
    writer.abort(staged)
    assert _data(store) == []
    prefix = f"{WHERE.prefix}/"
    assert list(store.view().pending_staged(prefix)) == []  # abandoned (Delete Blob)


def test_a_delta_job_on_adls_is_planned_after_the_probe_with_its_job_intent(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Regression: Delta on ADLS had no job intent (S3 only) and no probe, so a driver killed
    before its Delta commit left its completed files for good."""
    import json

    from lakegate_client.engine import jobs
    from lakegate_client.engine.job_intent import JOB_PREFIX

    store = FakeAdls()
    writer = _writer(monkeypatch, store, overwrite=False, fmt="delta")
    assert writer._plan.staged
    assert writer._plan.job
    # the probe: a conditional PUT, its listing, three more conditional PUTs
    assert [op for op, _ in store.calls][:5] == ["PutBlob", "ListBlobs", *["PutBlob"] * 3]
    intents = [k for k in store.objects if JOB_PREFIX in k]
    assert [WHERE.relative(k) for k in intents] == [
        f"{JOB_PREFIX}{writer._plan.write_id}.json"]
    body = json.loads(store.objects[intents[0]])
    assert (body["format"], body["state"], body["staged"]) == ("delta", "staged", True)
    jobs.end_job(jobs.job_of(adls_creds(), writer._plan.write_id))  # its heartbeat ends
    assert not [k for k in store.objects if JOB_PREFIX in k]
