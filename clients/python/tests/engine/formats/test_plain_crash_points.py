"""Crash points of the plain-table commit (issue 32): an error and a kill at every store call
that commit and abort make, for append, overwrite, create and a conflicting overwrite; then the
next writer recovers and the invariant must hold (``plain_scenarios``). The full enumeration is
fast on the fake store, so it all runs here; ``make harden`` (suite ``writes``) reports it."""

from __future__ import annotations

import pytest

from ..crash_points import KINDS, STALL, enumerate_points
from .plain_scenarios import CASES, PlainScenario, without_roll_forward


@pytest.mark.parametrize("aws", [False, True])
@pytest.mark.parametrize("case", CASES)
def test_every_crash_point_leaves_old_or_new_rows_and_an_honest_message(
    case: str, aws: bool,
) -> None:
    """Also a commit slower than every lease ("stall"): paused at each call while a rival
    overwrite recovers what it finds and commits; the outcome stays a serial order."""
    report = enumerate_points(PlainScenario(case, store={"aws_conflicts": aws}),
                              kinds=(*KINDS, STALL))
    assert len(report.calls) >= 4
    assert len(report.points) == 1 + 4 * len(report.calls)
    failed = [(p.n, p.call, p.kind, p.committed, p.violations) for p in report.failed]
    assert failed == []


def test_the_enumeration_catches_a_broken_protocol(monkeypatch: pytest.MonkeyPatch) -> None:
    """The harness can fail: with the roll-forward's retries removed, an error after the point
    of no return leaves a torn table (and recovery never runs for a job that was not killed)."""
    without_roll_forward(monkeypatch)
    report = enumerate_points(PlainScenario("overwrite"), kinds=("error",))
    assert report.failed


@pytest.mark.parametrize("case", ["append", "overwrite"])
def test_a_commit_completing_and_deleting_in_parallel_keeps_every_crash_point_safe(
    case: str,
) -> None:
    """Five uploads over two old files: past the first completion the other four completions,
    then the deletes, run on the commit's worker threads; an error, a lost answer, a kill or a
    stall at any call still leaves old or new rows, never a mix once recovered."""
    report = enumerate_points(PlainScenario(case, uploads=5), kinds=(*KINDS, STALL))
    assert sum(op == "CompleteMultipartUpload" for op, _ in report.calls) == 5
    failed = [(p.n, p.call, p.kind, p.committed, p.violations) for p in report.failed]
    assert failed == []


@pytest.mark.parametrize("case", CASES)
def test_every_crash_point_on_adls_leaves_old_or_new_rows_and_an_honest_message(
    case: str,
) -> None:
    """The same enumeration on a fake ADLS container (issue 34): tasks' files are uncommitted
    blocks, the commit's Put Block List publishes them, markers and intents are conditional
    Put Blobs refused with 409/412, and abandoned blocks cannot be removed."""
    report = enumerate_points(PlainScenario(case, adls=True), kinds=(*KINDS, STALL))
    assert case == "conflict" or any(op == "PutBlockList" for op, _ in report.calls)
    assert len(report.points) == 1 + 4 * len(report.calls)
    failed = [(p.n, p.call, p.kind, p.committed, p.violations) for p in report.failed]
    assert failed == []


def test_the_adls_enumeration_catches_a_broken_protocol(monkeypatch: pytest.MonkeyPatch) -> None:
    """The ADLS harness can fail too: without the roll-forward's retries an error after the
    first Put Block List leaves a torn table."""
    without_roll_forward(monkeypatch)
    report = enumerate_points(PlainScenario("overwrite", adls=True), kinds=("error",))
    assert report.failed
