"""Crash points of the plain-table commit on GCS: the enumeration of ``test_plain_crash_points``
(an error, a lost answer, a kill and a stall at every store call of commit and abort, then the
next writer recovers) with the real GcsStore over an in-memory GCS JSON API. Run as GCS answers
(compose honours ``ifGenerationMatch``) and as fake-gcs-server does (its compose ignores it)."""

from __future__ import annotations

import pytest

from ..crash_points import KINDS, STALL, enumerate_points
from .plain_scenarios import CASES, GcsPlainScenario, without_roll_forward


@pytest.mark.parametrize("compose_conditions", [True, False])
@pytest.mark.parametrize("case", CASES)
def test_every_crash_point_on_gcs_leaves_old_or_new_rows_and_an_honest_message(
    case: str, compose_conditions: bool,
) -> None:
    scenario = GcsPlainScenario(case, store={"honours_compose_conditions": compose_conditions})
    report = enumerate_points(scenario, kinds=(*KINDS, STALL))
    assert len(report.calls) >= 4
    if case != "conflict":
        assert sum(op == "Compose" for op, _ in report.calls) == 2  # the two files published
    assert len(report.points) == 1 + 4 * len(report.calls)
    failed = [(p.n, p.call, p.kind, p.committed, p.violations) for p in report.failed]
    assert failed == []


def test_the_gcs_enumeration_catches_a_broken_protocol(monkeypatch: pytest.MonkeyPatch) -> None:
    """The harness can fail on GCS too: without the roll-forward's retries and recovery, an
    error past the point of no return leaves a torn table."""
    without_roll_forward(monkeypatch)
    report = enumerate_points(GcsPlainScenario("overwrite"), kinds=("error",))
    assert report.failed


def test_a_completion_that_lost_its_answer_is_not_redone_as_a_new_file() -> None:
    """A lost answer on the publishing compose: the retry finds the file (GCS: 412 on
    ifGenerationMatch=0; fake-gcs-server: the parts are gone, the file is there)."""
    for conditions in (True, False):
        scenario = GcsPlainScenario("append", store={"honours_compose_conditions": conditions})
        report = enumerate_points(scenario, kinds=("lost",),
                                  only=[i + 1 for i, (op, _) in enumerate(
                                      enumerate_points(scenario, kinds=()).calls)
                                        if op == "Compose"])  # fmt: skip
        assert [p for p in report.points if p.kind == "lost"]
        assert report.failed == []
