"""Crash-point enumeration: run a write once to record every store call, then again for each
call N with (a) an error at N and (b) the process killed at N, recover, and check the invariant.

Why (ALICE, SQLite's crash tests, FoundationDB's simulation in small): a commit protocol is only
as good as its worst interleaving, and the calls a commit and an abort make are few enough to try
a failure at every one of them. This module knows nothing of a table format: a
:class:`Scenario` seeds a store, runs the job as Spark would (commit, then abort when commit
raised; no abort after a kill), recovers as the next writer or reader would, and names the
violations. ``hardening/`` runs every scenario and both kinds; ``make test`` a fast subset.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Protocol

from .stores.fake_s3 import FakeS3, Fault, Killed

KINDS = ("error", "kill", "lost")  # "lost": the call's effect lands, its answer is a 503
STALL = "stall"  # opt-in: the job pauses at the call past every lease while a rival acts


class Scenario(Protocol):
    """One case (append, overwrite, create...) of one format."""

    name: str

    def fresh(self) -> FakeS3:
        """A store with the old table and the job's staged data; its call log is empty."""
        ...

    def run(self, s3: FakeS3) -> bool:
        """The job's commit (and abort when it raised) on ``s3``; True when the job reports
        success ("committed"). A :class:`Killed` propagates (the driver is gone)."""
        ...

    def recover(self, s3: FakeS3) -> None:
        """What the next writer or reader (a fresh process on ``s3``) does first."""
        ...

    def violations(self, s3: FakeS3, committed: bool | None) -> list[str]:
        """What is wrong with the store now (``committed``: None after a kill)."""
        ...

    # Optional, for the "stall" kind: ``stall(s3)`` is what a rival does (on its own client)
    # while the job is paused past every lease.


@dataclass(frozen=True)
class Point:
    """One injected failure and what it left."""

    n: int
    call: tuple[str, str]
    kind: str
    committed: bool | None
    violations: tuple[str, ...]


@dataclass
class CrashReport:
    """Every crash point of one scenario."""

    scenario: str
    calls: list[tuple[str, str]] = field(default_factory=list)
    points: list[Point] = field(default_factory=list)

    @property
    def failed(self) -> list[Point]:
        return [p for p in self.points if p.violations]


def fault_of(kind: str) -> Fault:
    """The failure injected at one call: a 503 (S3's "slow down, try again"), the same after
    the call took effect (an ambiguous failure), or a kill."""
    if kind in ("kill", STALL):
        return Fault(kind=kind)
    return Fault(code="ServiceUnavailable", status=503, after=kind == "lost")


def run_point(scenario: Scenario, n: int, kind: str, call: tuple[str, str] = ("", "")) -> Point:
    """The job with a failure at call ``n``, then recovery by a fresh process, then the check."""
    s3 = scenario.fresh()
    job = s3.view(faults={n: fault_of(kind)})
    stall = getattr(scenario, "stall", None)
    if kind == STALL and stall is not None:
        job.on_stall = lambda: stall(s3.view())
    committed: bool | None
    try:
        committed = scenario.run(job)
    except Killed:
        committed = None
    recovering = s3.view()
    scenario.recover(recovering)
    return Point(n, call, kind, committed, tuple(scenario.violations(s3.view(), committed)))


def enumerate_points(scenario: Scenario, kinds: Iterable[str] = KINDS,
                     only: Iterable[int] | None = None) -> CrashReport:
    """Record the calls of a fault-free run, then fail each one (``only``: a subset of N)."""
    report = CrashReport(scenario.name)
    s3 = scenario.fresh()
    job = s3.view()
    committed = scenario.run(job)
    report.calls = list(job.calls)
    baseline = tuple(scenario.violations(s3.view(), committed))
    report.points.append(Point(0, ("none", ""), "none", committed, baseline))
    numbers = list(only) if only is not None else range(1, len(report.calls) + 1)
    for n in numbers:
        if n > len(report.calls):
            continue
        for kind in kinds:
            report.points.append(run_point(scenario, n, kind, report.calls[n - 1]))
    return report
