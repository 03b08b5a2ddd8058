"""The store probe: a store that ignores conditional PUTs is refused before anything is written
(issue 32 finding 3); every store answer that means "condition failed" is a conflict."""

from __future__ import annotations

import logging

import pytest

from lakegate_client.engine.conditional_writes import (
    ACCEPT_RISK_OPTION,
    ConditionalWriteProbe,
    UnsafeStoreError,
    is_conflict,
    put_conditional,
)

from .stores.fake_s3 import FakeS3, Fault


def test_a_store_that_ignores_the_headers_is_refused_loudly_and_left_clean() -> None:
    s3 = FakeS3(honours_conditions=False)
    with pytest.raises(UnsafeStoreError) as caught:
        ConditionalWriteProbe().ensure(s3, "b", "wh/t1")
    message = str(caught.value)
    assert "second If-None-Match: * PUT of the same key succeeded" in message
    assert ACCEPT_RISK_OPTION in message
    assert "http://fake-s3" in message
    assert s3.objects == {}  # the probe objects are gone, nothing else was written


def test_accepting_the_risk_writes_on_with_a_warning(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING):
        ConditionalWriteProbe().ensure(FakeS3(honours_conditions=False), "b", "wh/t1",
                                       accept_risk=True)
    assert ACCEPT_RISK_OPTION in caplog.text


@pytest.mark.parametrize("aws", [False, True])
def test_a_store_that_honours_them_passes_once_per_endpoint_and_bucket(aws: bool) -> None:
    probe, s3 = ConditionalWriteProbe(), FakeS3(aws_conflicts=aws)
    probe.ensure(s3, "b", "wh/t1")
    first = len(s3.calls)
    assert first >= 4
    probe.ensure(s3, "b", "wh/t2")  # remembered: same endpoint and bucket
    assert len(s3.calls) == first
    probe.ensure(s3, "other", "wh/t1")
    assert len(s3.calls) > first
    assert s3.objects == {}


def test_a_transient_error_while_probing_is_raised_and_not_remembered() -> None:
    probe = ConditionalWriteProbe()
    with pytest.raises(FakeS3.exceptions.ClientError):
        probe.ensure(FakeS3(faults={2: Fault()}), "b", "wh/t1")
    probe.ensure(FakeS3(), "b", "wh/t1")  # probed again, passes


@pytest.mark.parametrize(("code", "status", "if_match", "conflict"), [
    ("PreconditionFailed", 412, False, True),
    ("ConditionalRequestConflict", 409, False, True),
    ("NoSuchKey", 404, True, True),
    ("NoSuchKey", 404, False, False),
    ("ServiceUnavailable", 503, True, False),
])
def test_conflict_answers(code: str, status: int, if_match: bool, conflict: bool) -> None:
    exc = FakeS3.exceptions.ClientError(
        {"Error": {"Code": code}, "ResponseMetadata": {"HTTPStatusCode": status}}, "PutObject")
    assert is_conflict(exc, if_match=if_match) is conflict


def test_put_conditional_reads_409_and_404_as_lost_races() -> None:
    s3 = FakeS3(aws_conflicts=True, faults={1: Fault(code="ConditionalRequestConflict",
                                                      status=409)})
    assert put_conditional(s3, "b", "k", b"x", None) is None
    assert put_conditional(s3, "b", "missing", b"x", '"abc"') is None  # AWS: 404
    assert put_conditional(s3, "b", "k", b"x", None) is not None


def test_a_store_whose_listings_lag_its_writes_is_refused_and_left_clean() -> None:
    """The writers find records and intents by listing; a store whose listing does not show an
    object just written could let a sweep delete a running job's files."""
    s3 = FakeS3(lagging_listings=True)
    with pytest.raises(UnsafeStoreError) as caught:
        ConditionalWriteProbe().ensure(s3, "b", "wh/t1")
    assert "a listing right after a PUT did not show the new object" in str(caught.value)
    assert s3.objects == {}
