"""`lakegate check`'s clock line (the other steps run against the real stack in
tests/integration/gateway/test_cli.py)."""

import io

from gateway.check import _Report, clock_line
from gateway.clock_skew import ClockSkew


def report_of(skew):
    out = io.StringIO()
    report = _Report(out, [])
    clock_line(report, skew)
    return report, out.getvalue()


def test_no_remote_date_heard_prints_no_clock_line(clock, metrics):
    report, text = report_of(ClockSkew(clock, metrics))
    assert text == ""
    assert not report.failed


def test_agreeing_clocks_are_one_ok_line(clock, metrics):
    skew = ClockSkew(clock, metrics)
    skew.observe("idp", float(int(clock.true_now())), clock.monotonic())
    skew.observe("catalog", float(int(clock.true_now())), clock.monotonic())
    report, text = report_of(skew)
    assert text.startswith("ok   clock: remote clock minus local: catalog +")
    assert "idp +" in text
    assert not report.failed


def test_a_catalog_clock_600_s_behind_fails_the_check_naming_it(clock, metrics):
    skew = ClockSkew(clock, metrics)
    skew.observe("idp", float(int(clock.true_now())), clock.monotonic())
    skew.observe("catalog", float(int(clock.true_now() - 600)), clock.monotonic())
    report, text = report_of(skew)
    assert text.startswith("FAIL clock:")
    assert "catalog -599" in text or "catalog -600" in text
    assert "catalog beyond 60 s" in text
    assert report.failed
