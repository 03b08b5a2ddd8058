"""Top frames from py-spy's raw (collapsed) stacks."""

from __future__ import annotations

from loadtest.profiler import top_frames

RAW = "\n".join([
    "<module> (gateway/__main__.py:3);run (gateway/serve.py:70);"
    "Runner.run (asyncio/runners.py:1) 60",
    "<module> (gateway/__main__.py:3);dispatch (gateway/surfaces/http_pipeline.py:140);"
    "f (a.py:1);f (a.py:2) 30",
    "<module> (gateway/__main__.py:3);dispatch (gateway/surfaces/http_pipeline.py:150) 10",
    "garbage line",
])


def test_self_and_inclusive_shares_per_frame_name_without_line_numbers() -> None:
    top = top_frames(RAW)
    assert top["samples"] == 100
    assert top["self_pct"] == [["Runner.run (runners.py)", 60.0], ["f (a.py)", 30.0],
                               ["dispatch (http_pipeline.py)", 10.0]]
    incl = dict((k, v) for k, v in top["inclusive_pct"])
    assert incl["<module> (__main__.py)"] == 100.0
    assert incl["dispatch (http_pipeline.py)"] == 40.0
    assert incl["f (a.py)"] == 30.0  # recursion counted once per sample


def test_no_samples() -> None:
    assert top_frames("") == {"samples": 0, "self_pct": [], "inclusive_pct": []}
