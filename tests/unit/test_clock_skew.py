"""ClockSkew: remote Dates anchored to monotonic time, the skew gauge and its WARNING."""

import logging

import pytest

from gateway.clock_skew import ClockSkew


def gauge(metrics, clock_name):
    return metrics.registry.get_sample_value("lakegate_clock_skew_seconds",
                                             {"clock": clock_name})


def test_every_clock_series_exists_at_zero_from_start(metrics):
    assert gauge(metrics, "catalog") == 0.0
    assert gauge(metrics, "idp") == 0.0


def test_the_gauge_shows_a_remote_clock_minus_the_local_one(clock, metrics):
    skew = ClockSkew(clock, metrics)
    sent = clock.monotonic()
    clock.advance(0.2)
    skew.observe("catalog", float(int(clock.true_now() - 600)), sent)
    assert gauge(metrics, "catalog") == pytest.approx(-600, abs=1.5)
    skew.observe("idp", float(int(clock.true_now())), clock.monotonic())
    assert gauge(metrics, "idp") == pytest.approx(0, abs=1.5)


def test_a_local_step_shows_on_every_remote_clock_at_the_next_answer(clock, metrics):
    skew = ClockSkew(clock, metrics)
    skew.observe("idp", float(int(clock.true_now())), clock.monotonic())
    clock.step_wall(3600)
    skew.observe("catalog", float(int(clock.true_now())), clock.monotonic())
    assert gauge(metrics, "idp") == pytest.approx(-3600, abs=1.5)
    assert gauge(metrics, "catalog") == pytest.approx(-3600, abs=1.5)


def test_the_reference_is_carried_on_the_monotonic_clock_not_the_wall_clock(clock, metrics):
    skew = ClockSkew(clock, metrics)
    sent = clock.monotonic()
    clock.advance(0.3)
    skew.observe("idp", float(int(clock.true_now())), sent)
    clock.advance(100)
    clock.step_wall(-3600)  # a step of the local clock moves nothing
    ref = skew.reference_now("idp", clock.monotonic())
    assert ref is not None
    assert clock.true_now() <= ref <= clock.true_now() + 1.5  # never reads earlier than real


def test_an_old_or_missing_reference_is_no_witness(clock, metrics):
    skew = ClockSkew(clock, metrics, max_age_s=600)
    assert skew.reference_now("idp", clock.monotonic()) is None
    skew.observe("idp", clock.true_now(), clock.monotonic())
    clock.advance(601)
    assert skew.reference_now("idp", clock.monotonic()) is None


def test_no_date_or_an_unknown_clock_changes_nothing(clock, metrics):
    skew = ClockSkew(clock, metrics)
    skew.observe("idp", None, clock.monotonic())
    skew.observe("s3", clock.true_now() + 999, clock.monotonic())  # unknown: no new label
    assert skew.skews() == {}
    assert metrics.registry.get_sample_value("lakegate_clock_skew_seconds",
                                             {"clock": "s3"}) is None


def test_a_disagreement_is_warned_about_once_per_interval(clock, metrics, caplog):
    skew = ClockSkew(clock, metrics, warn_every_s=300)
    caplog.set_level(logging.WARNING, logger="gateway.clock_skew")
    for _ in range(50):
        skew.observe("catalog", float(int(clock.true_now() - 120)), clock.monotonic())
        clock.advance(1)
    lines = [r for r in caplog.records if r.name == "gateway.clock_skew"]
    assert len(lines) == 1
    assert lines[0].clock == "catalog"
    assert lines[0].skew_s == pytest.approx(-120, abs=1.5)
    clock.advance(300)
    skew.observe("catalog", float(int(clock.true_now() - 120)), clock.monotonic())
    skew.observe("idp", float(int(clock.true_now())), clock.monotonic())  # agrees: no line
    assert len([r for r in caplog.records if r.name == "gateway.clock_skew"]) == 2
