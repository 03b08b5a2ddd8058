"""Crash-point enumeration of the Delta, Iceberg and Lance commits (part of the ``writes`` suite).

Why separate from the plain tables' (``crash_enumeration.py``): these commits go through
delta-rs, Lance and a pyiceberg catalog on local files, so their calls are recorded where the
driver's code meets the store or the catalog (``clients/python/tests/engine/format_scenarios.py``),
not on the fake S3 (which holds only the job intents and the Lance ledger). Same kinds (error,
lost answer, kill), same invariant, same summary keys, plus ``kill_orphans``: the job files left
unreferenced once the next write or read recovered the table (a violation; 0 expected). Each
format runs with its job intent (and Lance's ledger) on every store it is written to
(``FORMAT_STORES``: S3, plus ADLS for Delta and Lance, GCS for Lance; keys ``<fmt> <case>
(<store>)`` beside S3's ``<fmt> <case>``).
"""

from __future__ import annotations

import tempfile
from collections import Counter
from pathlib import Path
from typing import Any


def run_format_enumeration() -> dict[str, Any]:
    """Every format x store x case; one summary per scenario, keyed like the plain ones."""
    from clients.python.tests.engine.format_scenarios import (
        CASES,
        FORMAT_STORES,
        FORMATS,
        FormatScenario,
        enumerate_format,
    )

    cases: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="lakegate-crash-") as root:
        for fmt, store in ((f, s) for f in FORMATS for s in FORMAT_STORES[f]):
            for case in CASES:
                report = enumerate_format(FormatScenario(fmt, case, Path(root), store))
                kinds = Counter(p.kind for p in report.points if p.n)
                cases[report.scenario] = {
                    "calls": len(report.calls),
                    "crash_points": sum(kinds.values()),
                    "by_kind": dict(kinds),
                    "operations": report.calls,
                    "violations": len(report.failed),
                    "kill_orphans": report.kill_orphans,
                    "failed": [{"n": p.n, "call": [p.call, ""], "kind": p.kind,
                                "committed": p.reported, "violations": list(p.violations)}
                               for p in report.failed[:10]],
                }
    return cases
