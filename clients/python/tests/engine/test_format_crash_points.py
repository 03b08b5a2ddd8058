"""Crash points of the Delta, Iceberg and Lance commits (issue 32): an error, a lost answer and a
kill at every store and catalog call that planning (the job intent), the tasks (a Lance task's
lease renewal), commit and abort make, for append, overwrite and create; the invariant of
``format_scenarios`` must hold at each, including "no orphan once recovery ran". All of it runs
here on S3 (a few seconds per format; ``pytest -s`` prints the counts); on ADLS and GCS the
refused case (planning, tasks, commit, abort and recovery: the most calls) runs here and every
case in ``make harden`` (suite ``writes``), which reports them all."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from concurrent.futures import Future
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from lakegate_client.engine import jobs
from lakegate_client.engine.formats import delta as delta_format
from lakegate_client.engine.formats import lance as lance_format

pytest.importorskip("deltalake")
pytest.importorskip("lance")
pytest.importorskip("pyiceberg")
pytest.importorskip("pyspark")

from .format_scenarios import CASES, FORMAT_STORES, FORMATS, FormatScenario, enumerate_format

CLOUD = [(fmt, store) for fmt in FORMATS for store in FORMAT_STORES[fmt] if store != "s3"]


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("fmt", FORMATS)
def test_every_crash_point_leaves_old_or_new_rows_and_an_honest_message(
        tmp_path: Path, fmt: str, case: str) -> None:
    report = enumerate_format(FormatScenario(fmt, case, tmp_path))
    print(f"{fmt} {case}: {len(report.calls)} calls, {len(report.points) - 1} crash points, "
          f"{len(report.failed)} violations")
    assert any("commit" in c for c in report.calls)  # the point of no return is enumerated
    put, get = "s3: put_object (job intent)", "s3: get_object (job intent)"
    expected = {  # planning's PUT, then:
        "delta": [put, put, get],  # the fence on its ETag; the end reads the owner
        "lance": [put, put, "s3: delete_object (job intent)"],  # the same; a settled end
        "iceberg": [put, get, put],  # a fence that reads first
    }[fmt]
    if fmt == "lance" and case == "create":  # its task, 10 s on, renews at once
        expected = [put, get, put]
    if fmt == "lance" and case == "refused":  # the abort reads whether the outcome is unknown
        expected = [put, put, get]  # (ambiguous means keep, issue 50 item 4)
    assert [c for c in report.calls if "job intent" in c][:3] == expected
    assert len(report.points) == 1 + 3 * len(report.calls)
    assert [(p.n, p.call, p.kind, p.reported, p.violations) for p in report.failed] == []
    assert report.kill_orphans == 0


@pytest.mark.parametrize(("fmt", "store"), CLOUD)
def test_every_crash_point_on_adls_and_gcs_leaves_old_or_new_rows_and_no_orphan(
        tmp_path: Path, fmt: str, store: str) -> None:
    """The job's intent (and Lance's ledger) on the fake ADLS or the in-memory GCS: a driver
    killed at any call, before or after its commit, leaves no file behind once recovered."""
    report = enumerate_format(FormatScenario(fmt, "refused", tmp_path, store))
    print(f"{report.scenario}: {len(report.calls)} calls, {len(report.points) - 1} crash "
          f"points, {len(report.failed)} violations")
    # planning's create, then the fence on its ETag
    assert [c for c in report.calls if "job intent" in c][:2] == [
        f"{store}: put_if (job intent)"] * 2
    assert not [c for c in report.calls if c.startswith("s3:")]  # nothing left on S3
    assert len(report.points) == 1 + 3 * len(report.calls)
    assert [(p.n, p.call, p.kind, p.reported, p.violations) for p in report.failed] == []
    assert report.kill_orphans == 0


@pytest.mark.parametrize("fmt", FORMATS)
def test_the_enumeration_catches_the_orphans_of_a_killed_driver(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fmt: str) -> None:
    """The harness can fail: with the recovery of the next write or read doing nothing (as
    before the job intent), a driver killed before its commit leaves orphans, reported as
    violations."""
    from lakegate_client.spark import iceberg

    monkeypatch.setattr(jobs, "recover_jobs", lambda *_a, **_k: 0)
    monkeypatch.setattr(iceberg, "recover_iceberg_jobs", lambda *_a, **_k: 0)
    report = enumerate_format(FormatScenario(fmt, "append", tmp_path), kinds=("kill",))
    assert report.kill_orphans > 0
    assert any("unreferenced after the recovery" in v for p in report.failed
               for v in p.violations)


@contextmanager
def _before(step: Callable[[], Any] | None) -> Iterator[Future[Any] | None]:
    """Lance's ledger cleanup run before its commit call instead of beside it: the same calls,
    in one order, so that call N is the same call in every run."""
    if step is None:
        yield None
        return
    done: Future[Any] = Future()
    done.set_result(step())
    yield done


@pytest.mark.parametrize("fmt", FORMATS)
def test_the_enumeration_catches_a_guessed_commit_outcome(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fmt: str) -> None:
    """The harness can fail: with the resolution replaced by the old guess (an error means
    not committed), a lost answer to the commit call deletes or misreports committed rows."""
    from lakegate_client.spark import iceberg

    monkeypatch.setattr(delta_format, "delta_committed", lambda *_a: False)
    monkeypatch.setattr(lance_format, "lance_committed", lambda *_a, **_k: False)
    monkeypatch.setattr(iceberg.IcebergWriter, "committed", lambda _self: False)
    monkeypatch.setattr(iceberg, "iceberg_committed", lambda *_a: False)  # the recovery's too
    monkeypatch.setattr(lance_format, "alongside", _before)  # call numbers the threads not race
    report = enumerate_format(FormatScenario(fmt, "append", tmp_path), kinds=("lost",))
    assert any("commit" in p.call for p in report.failed)
