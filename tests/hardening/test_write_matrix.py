"""The write matrix's verdicts: what counts as a violation and what is only reported."""

from __future__ import annotations

from dataclasses import asdict

import pytest

pytest.importorskip("pyspark")

from hardening.write_matrix import CaseCounts, _judge, render_write_suite


def test_files_awaiting_the_ledger_sweep_are_reported_not_failed() -> None:
    """A Lance attempt that finished after its job's cleanup leaves its files and record for
    the next cleanup on the dataset: counted in their own column, not as orphans."""
    counts = CaseCounts(rounds=1)
    _judge(counts, ([1, 2], [1, 2], [], 0, 2), [[1, 2]])
    assert (counts.awaiting_sweep, counts.orphans, counts.violations) == (2, 0, 0)
    _judge(counts, ([1, 2], [1, 2], ["data/x.lance"], 0, 0), [[1, 2]])
    assert (counts.orphans, counts.violations) == (1, 1)
    rows = render_write_suite({"rounds": 1, "cases": {"lance": {"abort_late": asdict(counts)}}})
    header = next(r for r in rows if r.startswith("| format"))
    row = next(r for r in rows if r.startswith("| lance"))
    cells = dict(zip(header.split("|"), row.split("|"), strict=True))
    assert cells[" awaiting sweep "].strip() == "2"
    assert cells[" orphans "].strip() == "1"
