"""Prometheus text parsing used as fault evidence."""

from __future__ import annotations

from hardening.metrics_scrape import delta, parse, total

TEXT = """# HELP lakegate_requests_total requests
# TYPE lakegate_requests_total counter
lakegate_requests_total{surface="http",kind="credential",result="hit"} 120.0
lakegate_requests_total{surface="grpc",kind="credential",result="stale"} 3.0
lakegate_requests_total{surface="http",kind="credential",result="stale"} 2.0
lakegate_refresh_total{reason="ahead",status="error"} 4
lakegate_cache_entries 5
not a metric line at all
"""


def test_total_sums_every_series_matching_the_labels() -> None:
    samples = parse(TEXT)
    assert total(samples, "lakegate_requests_total", result="stale") == 5.0
    assert total(samples, "lakegate_requests_total") == 125.0
    assert total(samples, "lakegate_cache_entries") == 5.0
    assert total(samples, "lakegate_missing") == 0.0


def test_delta_never_goes_negative_after_a_restart_reset() -> None:
    before = parse(TEXT)
    after = parse('lakegate_refresh_total{reason="ahead",status="error"} 1\n')
    assert delta(before, after, "lakegate_refresh_total", status="error") == 0.0
    assert delta(after, before, "lakegate_refresh_total", status="error") == 3.0
