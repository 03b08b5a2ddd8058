"""The event-flood measurement's verdict and report (hardening/event_flood.py, report.py)."""

from __future__ import annotations

import json
from pathlib import Path

from hardening.event_flood import HEAVY_LEVELS, _event
from hardening.lockout import p99_bound_ms
from hardening.report import HardeningReport, render_markdown, write_report


def _window(p99: float, errors: int = 0) -> dict[str, object]:
    return {"requests": 100, "errors": errors, "error_rate": errors / 100, "p50_ms": 0.3,
            "p99_ms": p99}


def _measurement(control_p99: float, flooded_p99: float, refused: int = 5) -> dict[str, object]:
    counted = {"applied": 10, "ignored": 0, "malformed": 0, "refused": refused,
               "rate_limited": 100, "dropped": 0}
    ok = flooded_p99 <= p99_bound_ms(control_p99) and refused > 0
    return {"surface": "http_uds", "quiet": _window(5.0), "control": _window(control_p99),
            "flooded": _window(flooded_p99), "published": 1000, "published_control": 1000,
            "gateway_counted": counted, "ok": ok}


def test_a_flood_that_hurt_the_victim_or_was_not_refused_fails_the_run(tmp_path: Path) -> None:
    fine = HardeningReport()
    fine.isolation.event_flood_measured(_measurement(10.0, 15.0))
    assert fine.passed
    text = render_markdown(fine)
    assert "event flood: victim p99 5.0 ms quiet, 10.0 ms while 1,000 events went to an " \
           "unsubscribed subject (control), 15.0 ms" in text
    _, summary = write_report(fine, tmp_path)
    assert json.loads(summary.read_text())["isolation"]["event_flood"][0]["ok"] is True
    for hurt in (_measurement(10.0, 25.0), _measurement(10.0, 10.0, refused=0)):
        report = HardeningReport()
        report.isolation.event_flood_measured(hurt)
        assert not report.passed
        assert "[event_flood]" in render_markdown(report)


def test_the_heavy_event_is_a_deep_200_kb_rename() -> None:
    levels = ["n"] * HEAVY_LEVELS
    heavy = _event("renameGenericTable", "wh", levels, "t",
                   {"source": {"namespace": levels, "name": "t"},
                    "destination": {"namespace": ["flood"], "name": "t"}})
    assert 128 * 1024 < len(heavy) < 256 * 1024 * 2
    assert json.loads(heavy)["namespace"].count(".") == HEAVY_LEVELS - 1


def test_the_p99_bound_is_twice_the_baseline_but_never_within_a_scheduler_tick() -> None:
    assert p99_bound_ms(20.0) == 40.0
    assert p99_bound_ms(0.5) == 5.5  # a sub-millisecond p99 moves by a tick on a shared box
