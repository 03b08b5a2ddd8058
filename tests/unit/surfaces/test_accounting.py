"""Every request is counted exactly once, with the right result label."""

from __future__ import annotations

import asyncio

import pytest

from gateway.errors import (
    InvalidRequestError,
    NotFoundError,
    PermissionDeniedError,
    RateLimitedCallerError,
    UnauthenticatedError,
    UnavailableError,
)
from gateway.metrics import Metrics
from gateway.models import Outcome
from gateway.surfaces.accounting import Recorder, result_for_status
from tests.unit.surfaces.conftest import count, total_requests
from tests.unit.surfaces.fake_operations import FakeClock


@pytest.mark.parametrize(
    ("exc", "result"),
    [
        (UnauthenticatedError("x"), "denied"),
        (PermissionDeniedError("x"), "denied"),
        (RateLimitedCallerError("x"), "denied"),
        (InvalidRequestError("x"), "error"),
        (NotFoundError("x"), "not_found"),  # a table not created yet: an answer, not a fault
        (UnavailableError("x"), "error"),
        (RuntimeError("x"), "error"),
        (asyncio.CancelledError(), "error"),
    ],
)
def test_failures_are_classified(exc: BaseException, result: str, metrics: Metrics,
                                 clock: FakeClock) -> None:
    with pytest.raises(type(exc)), Recorder(metrics, clock).track("http", "credential"):
        raise exc
    assert count(metrics, "http", "credential", result) == 1
    assert total_requests(metrics) == 1


@pytest.mark.parametrize(("status", "result"), [(404, "not_found"), (400, "error"),
                                                (403, "error"), (409, "error"), (503, "error")])
def test_a_passed_through_catalog_answer_is_classified_like_its_error(
    status: int, result: str
) -> None:
    assert result_for_status(status) == result


def test_success_counts_the_outcome_and_observes_duration_and_remaining(
    metrics: Metrics, clock: FakeClock
) -> None:
    with Recorder(metrics, clock).track("grpc", "credential") as tally:
        clock.advance(0.25)
        tally.served(Outcome.STALE, 400.0)
    assert count(metrics, "grpc", "credential", "stale") == 1
    reg = metrics.registry
    assert reg.get_sample_value("lakegate_request_duration_seconds_sum",
                                {"surface": "grpc", "kind": "credential"}) == 0.25
    assert reg.get_sample_value("lakegate_served_remaining_seconds_sum") == 400.0


def test_metadata_success_without_outcome_counts_as_miss(metrics: Metrics,
                                                         clock: FakeClock) -> None:
    with Recorder(metrics, clock).track("rest", "metadata"):
        pass
    assert count(metrics, "rest", "metadata", "miss") == 1
    assert metrics.registry.get_sample_value("lakegate_served_remaining_seconds_count") == 0

