"""The plain-table commit protocol: serial outcomes or a loud WriteConflictError, never a tear."""

from __future__ import annotations

import pytest

from lakegate_client.engine.formats import plain as plain_commit
from lakegate_client.engine.formats.plain import (
    MARKER,
    WriteConflictError,
    commit_plain,
    plan_plain,
)
from lakegate_client.engine.stores.base import PendingUpload, S3Location

from ..stores.fake_s3 import FakeS3
from .plain_scenarios import staged_parts, visible_data

WHERE = S3Location.parse("s3://b/wh/t1")


def _stage(s3: FakeS3, write_id: str, n: int) -> list[PendingUpload]:
    return staged_parts(s3, WHERE, write_id, n)


def _data(s3: FakeS3) -> list[str]:
    return visible_data(s3, WHERE)


def _seed(s3: FakeS3) -> None:
    s3.objects[WHERE.key("part-old-00000-r.parquet")] = b"old"


def test_two_overwrites_planned_together_one_wins_the_other_conflicts() -> None:
    s3 = FakeS3()
    _seed(s3)
    plan_a, plan_b = plan_plain(s3, WHERE, "parquet"), plan_plain(s3, WHERE, "parquet")
    a, b = _stage(s3, "wa", 2), _stage(s3, "wb", 3)
    commit_plain(s3, WHERE, "parquet", plan_a, a, overwrite=True, write_id="wa")
    with pytest.raises(WriteConflictError, match="since this job planned"):
        commit_plain(s3, WHERE, "parquet", plan_b, b, overwrite=True, write_id="wb")
    assert _data(s3) == ["part-wa-00000-r.parquet", "part-wa-00001-r.parquet"]


def test_an_append_landing_after_an_overwrite_planned_is_a_conflict() -> None:
    s3 = FakeS3()
    _seed(s3)
    plan_o = plan_plain(s3, WHERE, "parquet")
    app = _stage(s3, "wx", 1)
    commit_plain(s3, WHERE, "parquet", plan_plain(s3, WHERE, "parquet"), app,
                 overwrite=False, write_id="wx")
    with pytest.raises(WriteConflictError, match="data files differ"):
        commit_plain(s3, WHERE, "parquet", plan_o, _stage(s3, "wo", 1), overwrite=True,
                     write_id="wo")
    assert _data(s3) == ["part-old-00000-r.parquet", "part-wx-00000-r.parquet"]
    # the marker is released: a fresh overwrite goes through
    commit_plain(s3, WHERE, "parquet", plan_plain(s3, WHERE, "parquet"), _stage(s3, "wn", 1),
                 overwrite=True, write_id="wn")
    assert _data(s3) == ["part-wn-00000-r.parquet"]


def test_appends_do_not_conflict_with_each_other() -> None:
    s3 = FakeS3()
    plan_1, plan_2 = plan_plain(s3, WHERE, "parquet"), plan_plain(s3, WHERE, "parquet")
    commit_plain(s3, WHERE, "parquet", plan_1, _stage(s3, "w1", 1), overwrite=False,
                 write_id="w1")
    commit_plain(s3, WHERE, "parquet", plan_2, _stage(s3, "w2", 1), overwrite=False,
                 write_id="w2")
    assert len(_data(s3)) == 2


def test_a_job_planned_while_another_overwrite_commits_conflicts(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    s3 = FakeS3()
    _seed(s3)
    plan_1 = plan_plain(s3, WHERE, "parquet")
    seen: list[plain_commit.PlainPlan] = []
    real_complete = plain_commit._complete

    def complete_and_plan(*args: object, **kwargs: object) -> None:
        if not seen:  # planned mid-commit, listing unchanged
            seen.append(plan_plain(s3, WHERE, "parquet"))
        real_complete(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(plain_commit, "_complete", complete_and_plan)
    commit_plain(s3, WHERE, "parquet", plan_1, _stage(s3, "w1", 1), overwrite=True,
                 write_id="w1")
    monkeypatch.setattr(plain_commit, "_complete", real_complete)
    assert seen[0].blocked_by == "w1"
    with pytest.raises(WriteConflictError, match="was committing"):
        commit_plain(s3, WHERE, "parquet", seen[0], _stage(s3, "w3", 1), overwrite=True,
                     write_id="w3")
    assert _data(s3) == ["part-w1-00000-r.parquet"]


def test_the_marker_is_hidden_from_readers() -> None:
    assert MARKER.startswith("_")


class _Slow(FakeS3):
    """A store whose completes and deletes take a while; records what overlapped."""

    def __init__(self) -> None:
        import threading

        super().__init__()
        self.flight, self.most = 0, 0
        self.events: list[str] = []
        self._guard = threading.Lock()

    def _slowly(self, what: str, call: object) -> object:
        import time

        with self._guard:
            self.flight += 1
            self.most = max(self.most, self.flight)
            self.events.append(f"start {what}")
        time.sleep(0.05)
        try:
            return call()  # type: ignore[operator]
        finally:
            with self._guard:
                self.flight -= 1
                self.events.append(f"end {what}")

    def complete_multipart_upload(self, **kw: object) -> dict[str, object]:
        return self._slowly("complete", lambda: super(_Slow, self).complete_multipart_upload(
            **kw))  # type: ignore[return-value]

    def delete_object(self, **kw: object) -> dict[str, object]:
        kind = "delete" if str(kw["Key"]).endswith(".parquet") else "other"
        return self._slowly(kind, lambda: super(_Slow, self).delete_object(
            **kw))  # type: ignore[return-value]


def test_a_commit_completes_and_deletes_in_parallel_after_the_first_completion_alone() -> None:
    """Issue 36: N completions one by one made the driver's commit the write's bottleneck. The
    first completion (the point of no return) still runs alone, every completion is tried
    before any delete starts, and the rest overlap."""
    s3 = _Slow()
    for i in range(6):
        s3.objects[WHERE.key(f"part-old-{i:05d}-r.parquet")] = b"old"
    plan = plan_plain(s3, WHERE, "parquet")
    staged = _stage(s3, "w1", 8)
    commit_plain(s3, WHERE, "parquet", plan, staged, overwrite=True, write_id="w1")
    assert _data(s3) == sorted(WHERE.relative(u.key) for u in staged)
    assert s3.events[:2] == ["start complete", "end complete"]  # alone
    ends = [i for i, e in enumerate(s3.events) if e == "end complete"]
    starts = [i for i, e in enumerate(s3.events) if e == "start delete"]
    assert (len(ends), len(starts)) == (8, 6)
    assert max(ends) < min(starts)
    assert s3.most > 1


def test_an_append_plans_with_one_listing_of_the_intents_only() -> None:
    """An append's commit checks nothing it planned (only overwrites take the marker and compare
    listings), yet planning read the marker and listed the whole table, a listing that grows
    with every append and whose file list was pickled into every task (issue 36). Abandoned
    commits are still rolled forward first."""
    s3 = FakeS3()
    _seed(s3)
    calls_before = len(s3.calls)
    plan = plan_plain(s3, WHERE, "parquet", overwrite=False)
    assert s3.calls[calls_before:] == [("ListObjectsV2", WHERE.key("_lakegate_intent-"))]
    commit_plain(s3, WHERE, "parquet", plan, _stage(s3, "wa", 1), overwrite=False,
                 write_id="wa")
    assert _data(s3) == ["part-old-00000-r.parquet", "part-wa-00000-r.parquet"]
    overwrite_plan = plan_plain(s3, WHERE, "parquet")  # an overwrite still records both files
    assert [rel for rel, _etag in overwrite_plan.files] == _data(s3)
