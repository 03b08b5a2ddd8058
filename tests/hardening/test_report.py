"""Report writer: the summary keys the issue names, and the verdict."""

from __future__ import annotations

import json
from pathlib import Path

from hardening.report import FaultResult, HardeningReport, render_markdown, write_report


def test_summary_has_every_contract_key(tmp_path: Path) -> None:
    report = HardeningReport(
        faults=[FaultResult("kill_idp", client_errors=0, expired_served=0, recovery_s=1.5)]
    )
    report.fuzz.add("schemathesis", cases=120, server_errors=0)
    report.isolation.record("http", leaked=False, description="bob denied alice table")
    _, summary_path = write_report(report, tmp_path)
    summary = json.loads(summary_path.read_text())
    assert summary["faults"][0]["name"] == "kill_idp"
    for key in ("client_errors", "expired_served", "recovery_s"):
        assert key in summary["faults"][0]
    assert summary["fuzz"]["cases"] == 120
    assert summary["fuzz"]["server_errors"] == 0
    assert summary["isolation"]["cases"] == 1
    assert summary["isolation"]["leaks"] == 0
    assert summary["secrets_found"] == 0
    assert summary["passed"] is True
    assert (tmp_path / "report.md").read_text().startswith("# Lakegate hardening report")


def test_any_expired_credential_fails_the_run() -> None:
    report = HardeningReport(faults=[FaultResult("kill_catalog", expired_served=1)])
    assert report.passed is False
    assert "FAIL" in render_markdown(report)


def test_isolation_leak_and_secret_and_skipped_suite_each_fail_the_run() -> None:
    leaky = HardeningReport()
    leaky.isolation.record("grpc", leaked=True, description="bob read alice credentials")
    assert not leaky.passed
    assert "bob read alice credentials" in render_markdown(leaky)
    assert not HardeningReport(secrets_found=1).passed
    assert not HardeningReport(suites_skipped={"faults": "gateway did not start"}).passed
    crashed = HardeningReport()
    crashed.fuzz.add("grpc", cases=10, server_errors=1)
    assert not crashed.passed


def test_soak_report_shows_flatness_instead_of_empty_suites() -> None:
    report = HardeningReport(faults=[FaultResult("soak_20min_periodic_faults")])
    report.extra["soak"] = {
        "flatness": {"rss_early_mib": 80.0, "rss_late_mib": 81.0},
        "samples": [{}] * 120,
    }
    text = render_markdown(report)
    assert "rss_late_mib: 81.0" in text
    assert "samples: 120" in text
    assert "## Hostile input" not in text
