"""Crash-point enumeration of the write commits (part of the ``writes`` suite).

Why: the write matrix races real jobs a few rounds; this tries a failure at *every* store call
that a commit and its abort make, as an error (a 503), as a lost answer (the call took effect,
the client saw a 503), as a driver killed right there, and as a stall (the job pauses there past
every lease while a rival overwrite recovers what it finds and commits: a commit slower than the
stale time), and checks the invariant after the next writer recovered
(``clients/python/tests/engine/crash_points.py``; scenarios per format, e.g.
``plain_scenarios.py``). It runs on the in-memory fake store, so it is exhaustive and quick; the
unit tests run the same enumeration.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from clients.python.tests.engine.crash_points import KINDS, STALL, CrashReport, enumerate_points
from clients.python.tests.engine.formats.plain_scenarios import (
    CASES,
    GcsPlainScenario,
    PlainScenario,
)
from clients.python.tests.engine.stores.fake_s3 import FakeS3
from hardening.format_crash_enumeration import run_format_enumeration

STORES: dict[str, dict[str, bool]] = {"s3-412": {}, "aws-409-404": {"aws_conflicts": True}}


def _summary(report: CrashReport) -> dict[str, Any]:
    kinds = Counter(p.kind for p in report.points if p.kind in (*KINDS, STALL))
    return {
        "calls": len(report.calls),
        "crash_points": sum(kinds.values()),
        "by_kind": dict(kinds),
        "operations": [op for op, _ in report.calls],
        "violations": len(report.failed),
        "failed": [{"n": p.n, "call": list(p.call), "kind": p.kind, "committed": p.committed,
                    "violations": list(p.violations)} for p in report.failed[:10]],
    }


def _unsafe_store_refused() -> dict[str, Any]:
    """A store that ignores conditional headers must be refused with nothing left written."""
    from lakegate_client.engine.conditional_writes import ConditionalWriteProbe, UnsafeStoreError

    s3 = FakeS3(honours_conditions=False)
    try:
        ConditionalWriteProbe().ensure(s3, "b", "wh/t1")
    except UnsafeStoreError as exc:
        return {"refused": True, "objects_left": len(s3.objects), "message": str(exc)[:200],
                "violations": len(s3.objects)}
    return {"refused": False, "objects_left": len(s3.objects), "violations": 1}


def run_crash_enumeration() -> dict[str, Any]:
    """Every plain-table case on each store flavour; ``violations`` is the total."""
    cases: dict[str, Any] = {}
    for store, flags in STORES.items():
        for case in CASES:
            report = enumerate_points(PlainScenario(case, store=dict(flags)),
                                      kinds=(*KINDS, STALL))
            cases[f"{report.scenario} ({store})"] = _summary(report)
    for case in CASES:  # ADLS: Azure's answers, AzureBlobStore's calls (issue 34)
        report = enumerate_points(PlainScenario(case, adls=True), kinds=(*KINDS, STALL))
        cases[f"{report.scenario} (adls-409-412)"] = _summary(report)
    for case in CASES:  # GCS: GcsStore's calls; compose preconditions honoured (GCS) or not
        for honoured, store in ((True, "gcs"), (False, "fake-gcs-server")):
            report = enumerate_points(
                GcsPlainScenario(case, store={"honours_compose_conditions": honoured}),
                kinds=(*KINDS, STALL))
            cases[f"{report.scenario} ({store})"] = _summary(report)
    cases.update(run_format_enumeration())  # Delta, Iceberg, Lance: on local files
    unsafe = _unsafe_store_refused()
    return {
        "cases": cases,
        "unsafe_store": unsafe,
        "violations": sum(c["violations"] for c in cases.values()) + unsafe["violations"],
    }


def render_crash_enumeration(result: dict[str, Any]) -> list[str]:
    """Markdown rows for the hardening report."""
    lines = ["", "## Commit crash points (every store call: error, lost answer, kill, stall)", "",
             "| scenario | calls | crash points | violations | first failures |",
             "|---|---|---|---|---|"]
    for name, c in result["cases"].items():
        first = "; ".join(f"{f['kind']}@{f['n']} {f['call'][0]}: {f['violations'][0]}"
                          for f in c["failed"][:2])
        lines.append(f"| {name} | {c['calls']} | {c['crash_points']} | {c['violations']} "
                     f"| {first} |")
    unsafe = result["unsafe_store"]
    lines.append(f"| store ignoring If-None-Match/If-Match | - | - | {unsafe['violations']} "
                 f"| refused: {unsafe['refused']}, objects left: {unsafe['objects_left']} |")
    return lines
