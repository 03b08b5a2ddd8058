"""The catalog's answers read into typed errors, `Retry-After` seconds and `Date` epochs."""

import pytest

from gateway.errors import (
    ConflictError,
    NotFoundError,
    RateLimitedError,
    UnavailableError,
    UpstreamBadRequestError,
)
from gateway.upstream.answers import map_error, parse_http_date, parse_retry_after
from gateway.upstream.transport import RawResponse


@pytest.mark.parametrize(
    ("status", "cls", "retryable"),
    [(400, UpstreamBadRequestError, False), (404, NotFoundError, False),
     (409, ConflictError, False), (412, UnavailableError, True),
     (429, RateLimitedError, True), (500, UnavailableError, True),
     (503, UnavailableError, True), (422, UpstreamBadRequestError, False)],
)
def test_status_table(status, cls, retryable):
    err = map_error(RawResponse(status, {}, b"not json"), "op", 0.0)
    assert type(err) is cls
    assert err.retryable is retryable


def test_short_term_credential_error_keeps_412_and_its_type():
    body = (b'{"error": {"message": "Rate exceeded", "type": "ShortTermCredentialError",'
            b' "code": 412}}')
    err = map_error(RawResponse(412, {}, body), "op", 0.0)
    assert err.retryable
    assert err.status == 412
    assert err.type_name == "ShortTermCredentialError"


@pytest.mark.parametrize(
    ("value", "seconds"),
    [("3", 3.0), (" 1.5 ", 1.5), ("-4", 0.0), ("junk", None), (None, None), ("99999", 300.0),
     ("Thu, 01 Jan 2027 00:00:10 GMT", 10.0)],
)
def test_retry_after_parsing(value, seconds):
    now = 1_798_761_600.0  # 2027-01-01T00:00:00Z
    assert parse_retry_after(value, now) == seconds


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("Sun, 06 Nov 1994 08:49:37 GMT", 784111777.0),
        (None, None),
        ("", None),
        ("yesterday", None),
        ("Sun, 06 Nov 1994 08:49:37 -0000", None),  # unknown zone: not an HTTP date
    ],
)
def test_http_dates_parse_to_epoch_seconds(value, expected):
    assert parse_http_date(value) == expected
