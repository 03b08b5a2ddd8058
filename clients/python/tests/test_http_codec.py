"""_http_codec.py: table paths and HTTP requests, JSON answers, the Lakekeeper error envelope."""

from __future__ import annotations

import json

import pytest

from lakegate_client import (
    ConflictError,
    InternalError,
    InvalidRequestError,
    NotFoundError,
    PermissionDeniedError,
    RateLimitedError,
    TableIdentityMismatchError,
    UnauthenticatedError,
    UnavailableError,
    _http_codec,
    _proto,
)
from lakegate_client._models import TableRef, TableSpec

REF = TableRef("my wh", ("a", "b/c"), "t 1")
NOW = 1_800_000_000.0


def test_table_path_joins_namespace_levels_with_1f_and_encodes_every_segment() -> None:
    request = _http_codec.http_credentials(REF, "write")
    assert request.method == "GET"
    assert request.path == "/v1/warehouses/my%20wh/namespaces/a%1Fb%2Fc/tables/t%201/credentials"
    assert request.params == {"access": "write"}


def test_load_asks_for_credentials_only_when_vended() -> None:
    assert _http_codec.http_load(REF, False, "read").params == {}
    assert _http_codec.http_load(REF, True, "write").params == {"vended": "true", "access": "write"}


def test_list_create_drop_rename_requests() -> None:
    listing = _http_codec.http_list("wh", ("ns",), "tok", 50)
    assert (listing.path, listing.params) == (
        "/v1/warehouses/wh/namespaces/ns/tables",
        {"page_token": "tok", "page_size": "50"},
    )
    create = _http_codec.http_create(REF, TableSpec("delta", None, "docs", {"k": "v"}), "key-1")
    assert create.method == "POST"
    assert create.json == {
        "name": "t 1",
        "format": "delta",
        "doc": "docs",
        "properties": {"k": "v"},
    }
    assert create.headers == {"Idempotency-Key": "key-1"}
    drop = _http_codec.http_drop(REF, True, False)
    assert (drop.method, drop.params) == ("DELETE", {"purge": "true", "force": "false"})
    rename = _http_codec.http_rename(REF, TableRef("my wh", ("x",), "y"))
    assert rename.path == "/v1/warehouses/my%20wh/tables/rename"
    assert rename.json == {
        "source": {"namespace": ["a", "b/c"], "name": "t 1"},
        "destination": {"namespace": ["x"], "name": "y"},
    }


def test_credentials_answer_is_parsed_into_a_snapshot() -> None:
    body = {
        "warehouse_id": "uuid",
        "namespace": ["a", "b/c"],
        "table": "t 1",
        "access": "write",
        "location": "s3://w/t",
        "expires_at_ms": 1_800_000_000_000,
        "remaining_s": 99.5,
        "outcome": "coalesced",
        "credentials": [
            {"prefix": "s3://w/t", "config": {"s3.region": "r"}, "expires_at_ms": 1_800_000_000_000}
        ],
    }
    creds = _http_codec.credentials_from_json(body, REF, "write")
    assert (creds.location, creds.outcome, creds.access, creds.warehouse_id) == (
        "s3://w/t",
        "coalesced",
        "write",
        "uuid",
    )
    assert (creds.namespace, creds.table, creds.served_remaining_s) == (("a", "b/c"), "t 1", 99.5)
    assert creds.config == {"s3.region": "r"}
    assert creds.expires_at_ms == 1_800_000_000_000


def test_load_answer_keeps_credentials_only_when_vended() -> None:
    body = {
        "table": {
            "name": "t",
            "format": "lance",
            "base_location": "s3://w/t",
            "protected": True,
            "doc": "d",
            "properties": {"p": "1"},
        },
        "config": {"s3.region": "r"},
        "credentials": [{"prefix": "s3://w/t", "config": {"s3.access-key-id": "AK"}}],
        "warehouse_id": "uuid",
    }
    loaded = _http_codec.loaded_from_json(body, REF, "read", True)
    assert (loaded.format, loaded.base_location, loaded.protected, loaded.doc) == (
        "lance",
        "s3://w/t",
        True,
        "d",
    )
    assert loaded.credentials is not None
    assert loaded.credentials.config == {"s3.region": "r", "s3.access-key-id": "AK"}
    assert _http_codec.loaded_from_json(body, REF, "read", False).credentials is None


def envelope(status: int, type_: str, message: str = "gateway says no") -> bytes:
    return json.dumps(
        {
            "error": {
                "message": message,
                "type": type_,
                "code": status,
                "stack": ["Error ID: req-42"],
            }
        }
    ).encode()


@pytest.mark.parametrize(
    ("status", "cls"),
    [
        (400, InvalidRequestError),
        (401, UnauthenticatedError),
        (403, PermissionDeniedError),
        (404, NotFoundError),
        (409, ConflictError),
        (412, UnavailableError),
        (429, RateLimitedError),
        (500, InternalError),
        (502, UnavailableError),
        (503, UnavailableError),
        (504, UnavailableError),
        (418, InvalidRequestError),
        (599, InternalError),
    ],
)
def test_http_status_picks_the_error_class(status: int, cls: type[Exception]) -> None:
    error = _http_codec.error_from_http(status, envelope(status, "SomeType"), {})
    assert type(error) is cls
    assert (error.status, error.type, error.message, error.request_id) == (
        status,
        "SomeType",
        "gateway says no",
        "req-42",
    )


def test_http_error_without_an_envelope_still_names_the_status() -> None:
    error = _http_codec.error_from_http(502, b"<html>bad gateway</html>", {})
    assert isinstance(error, UnavailableError)
    assert "502" in error.message


def test_rate_limit_carries_retry_after() -> None:
    error = _http_codec.error_from_http(429, envelope(429, "RateLimited"), {"Retry-After": "3"})
    assert isinstance(error, RateLimitedError)
    assert error.retry_after_s == 3.0


def test_expected_identity_goes_in_the_query_and_table_id_comes_back() -> None:
    req = _http_codec.http_credentials(REF, "write", "s3://b/t/", "0198-ABC")
    assert req.params == {"access": "write", "expected_location": "s3://b/t/",
                          "table_id": "0198-ABC"}
    assert _http_codec.http_credentials(REF, "read").params == {"access": "read"}
    body = {"location": "s3://b/t", "table_id": "0198-abc", "credentials": [],
            "expires_at_ms": None}
    assert _http_codec.credentials_from_json(body, REF, "read").table_id == "0198-abc"
    assert _http_codec.credentials_from_json({**body, "table_id": None}, REF,
                                             "read").table_id is None


def test_identity_mismatch_is_its_own_conflict() -> None:
    error = _http_codec.error_from_http(409, envelope(409, "TableIdentityMismatch"), {})
    assert type(error) is TableIdentityMismatchError
    assert isinstance(error, ConflictError)
    assert type(_http_codec.error_from_http(409, envelope(409, "Conflict"), {})) is ConflictError


def test_grpc_request_carries_the_expected_identity() -> None:
    msg = _proto.grpc_credentials_request(REF, "read", "s3://b/t", "0198-abc")
    assert (msg.expected_location, msg.table_id) == ("s3://b/t", "0198-abc")
    assert _proto.grpc_credentials_request(REF, "read").expected_location == ""
