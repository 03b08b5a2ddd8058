"""Staged uploads: nothing is visible until the driver completes; failures leave nothing."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from lakegate_client.engine import staged
from lakegate_client.engine.staged import StagedWriter, stage_parquet, sweep_uploads
from lakegate_client.engine.stores.base import S3Location

from .stores.fake_s3 import FakeS3

WHERE = S3Location.parse("s3://b/wh/t1/")
SCHEMA = pa.schema([("id", pa.int64())])


def _batches(n: int) -> list[pa.RecordBatch]:
    return [pa.record_batch([pa.array(range(i * 10, i * 10 + 10))], schema=SCHEMA)
            for i in range(n)]


def test_a_staged_file_is_invisible_until_completed() -> None:
    s3 = FakeS3()
    up = stage_parquet(s3, "b", WHERE.key("part-w1-00000-a.parquet"), SCHEMA, _batches(3))
    assert s3.objects == {}
    assert len(s3.uploads) == 1
    staged.complete_uploads(s3, "b", [up])
    data = s3.objects[WHERE.key("part-w1-00000-a.parquet")]
    assert len(data) == up.size
    assert pq.read_table(pa.BufferReader(data)).column("id").to_pylist() == list(range(30))


def test_parts_are_cut_at_the_part_size(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(staged, "PART_BYTES", 10)
    s3 = FakeS3()
    sink = StagedWriter(s3, "b", "k")
    sink.write(b"x" * 25)
    up = sink.finish()
    assert [n for n, _ in up.parts] == [1, 2, 3]
    assert up.size == 25


def test_a_task_that_fails_while_writing_aborts_its_upload() -> None:
    def failing() -> list[pa.RecordBatch]:
        yield _batches(1)[0]
        raise RuntimeError("boom")

    s3 = FakeS3()
    with pytest.raises(RuntimeError, match="boom"):
        stage_parquet(s3, "b", WHERE.key("part-w1-00000-a.parquet"), SCHEMA, failing())
    assert s3.uploads == {}
    assert s3.objects == {}


def test_the_sweep_aborts_only_this_jobs_pending_uploads() -> None:
    s3 = FakeS3()
    mine = s3.create_multipart_upload(Bucket="b", Key=WHERE.key("part-w1-00001-x.parquet"))
    other = s3.create_multipart_upload(Bucket="b", Key=WHERE.key("part-w2-00001-x.parquet"))
    assert sweep_uploads(s3, WHERE, "w1") == 1
    assert set(s3.uploads) == {other["UploadId"]}
    assert mine["UploadId"] not in s3.uploads


def test_completions_overlap_and_every_one_is_tried_before_a_failure_is_raised() -> None:
    """Issue 36: the driver completed N uploads one by one. They now overlap (bounded); one
    failing still fails the call, after the others were tried (none is left half-decided)."""
    import threading
    import time

    from .stores.fake_s3 import Fault

    class Slow(FakeS3):
        flight = most = 0
        guard = threading.Lock()

        def complete_multipart_upload(self, **kw: object) -> dict[str, object]:
            with self.guard:
                Slow.flight += 1
                Slow.most = max(Slow.most, Slow.flight)
            time.sleep(0.05)
            try:
                return super().complete_multipart_upload(**kw)  # type: ignore[arg-type]
            finally:
                with self.guard:
                    Slow.flight -= 1

    s3 = Slow()
    ups = [stage_parquet(s3, "b", WHERE.key(f"part-w1-{i:05d}-a.parquet"), SCHEMA, _batches(1))
           for i in range(6)]
    staged.complete_uploads(s3, "b", ups)
    assert len(s3.objects) == 6
    assert Slow.most > 1

    s3 = FakeS3()
    ups = [stage_parquet(s3, "b", WHERE.key(f"part-w2-{i:05d}-a.parquet"), SCHEMA, _batches(1))
           for i in range(4)]
    s3.faults = {len(s3.calls) + 1: Fault(code="InternalError", status=500)}
    with pytest.raises(Exception, match="InternalError"):
        staged.complete_uploads(s3, "b", ups)
    assert len(s3.objects) == 3  # the three others completed
