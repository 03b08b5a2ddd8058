"""The sans-IO core: request building, answer parsing, error mapping and the credential memo."""

from __future__ import annotations

import json
from typing import Any

import grpc
import pytest
from lakegate.v1 import catalog_pb2, common_pb2, credentials_pb2
from lakegate_client import (
    ClientConfig,
    ConfigurationError,
    ConflictError,
    GatewayConnectionError,
    GatewayTimeoutError,
    InternalError,
    InvalidRequestError,
    NotFoundError,
    PermissionDeniedError,
    RateLimitedError,
    StorageCredential,
    TableCredentials,
    UnauthenticatedError,
    UnavailableError,
    _base,
)
from lakegate_client._base import CredentialMemo, TableRef

REF = TableRef("my wh", ("a", "b/c"), "t 1")
NOW = 1_800_000_000.0


def test_table_path_joins_namespace_levels_with_1f_and_encodes_every_segment() -> None:
    request = _base.http_credentials(REF, "write")
    assert request.method == "GET"
    assert request.path == "/v1/warehouses/my%20wh/namespaces/a%1Fb%2Fc/tables/t%201/credentials"
    assert request.params == {"access": "write"}


def test_load_asks_for_credentials_only_when_vended() -> None:
    assert _base.http_load(REF, False, "read").params == {}
    assert _base.http_load(REF, True, "write").params == {"vended": "true", "access": "write"}


def test_list_create_drop_rename_requests() -> None:
    listing = _base.http_list("wh", ("ns",), "tok", 50)
    assert (listing.path, listing.params) == (
        "/v1/warehouses/wh/namespaces/ns/tables",
        {"page_token": "tok", "page_size": "50"},
    )
    create = _base.http_create(REF, "delta", None, "docs", {"k": "v"}, "key-1")
    assert create.method == "POST"
    assert create.json == {
        "name": "t 1",
        "format": "delta",
        "doc": "docs",
        "properties": {"k": "v"},
    }
    assert create.headers == {"Idempotency-Key": "key-1"}
    drop = _base.http_drop(REF, True, False)
    assert (drop.method, drop.params) == ("DELETE", {"purge": "true", "force": "false"})
    rename = _base.http_rename(REF, TableRef("my wh", ("x",), "y"))
    assert rename.path == "/v1/warehouses/my%20wh/tables/rename"
    assert rename.json == {
        "source": {"namespace": ["a", "b/c"], "name": "t 1"},
        "destination": {"namespace": ["x"], "name": "y"},
    }


def test_caller_headers_always_carry_the_anti_forgery_header() -> None:
    anonymous = ClientConfig.resolve(environ={})
    with_token = ClientConfig.resolve(token="tok", environ={})  # noqa: S106
    assert _base.auth_headers(anonymous) == {"X-Lakegate-Request": "1"}
    assert _base.auth_headers(with_token) == {
        "X-Lakegate-Request": "1",
        "Authorization": "Bearer tok",
    }
    assert _base.grpc_metadata(with_token) == (
        ("x-lakegate-request", "1"),
        ("authorization", "Bearer tok"),
    )


def test_missing_warehouse_is_a_configuration_error_naming_the_variable() -> None:
    with pytest.raises(ConfigurationError, match="LAKEGATE_WAREHOUSE"):
        _base.resolve_warehouse(ClientConfig.resolve(environ={}), None)


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
    creds = _base.credentials_from_json(body, REF, "write")
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
    loaded = _base.loaded_from_json(body, REF, "read", True)
    assert (loaded.format, loaded.base_location, loaded.protected, loaded.doc) == (
        "lance",
        "s3://w/t",
        True,
        "d",
    )
    assert loaded.credentials is not None
    assert loaded.credentials.config == {"s3.region": "r", "s3.access-key-id": "AK"}
    assert _base.loaded_from_json(body, REF, "read", False).credentials is None


def test_proto_answers_are_parsed_like_json_ones() -> None:
    msg = credentials_pb2.GetTableCredentialsResponse(
        warehouse_id="uuid",
        location="s3://w/t",
        expires_at_ms=1_800_000_000_000,
        remaining_seconds=12.0,
        outcome=common_pb2.CACHE_OUTCOME_STALE,
        credentials=[common_pb2.StorageCredential(prefix="s3://w/t", config={"k": "v"})],
    )
    creds = _base.credentials_from_proto(msg, REF, "read")
    assert (creds.outcome, creds.config, creds.served_remaining_s) == ("stale", {"k": "v"}, 12.0)
    page = catalog_pb2.ListTablesResponse(
        identifiers=[common_pb2.TableIdentifier(namespace=["n"], name="x", format="csv", id="1")],
        next_page_token="",
    )
    ids, token = _base.identifiers_from_proto(page)
    assert token is None
    assert ids[0].namespace == ("n",)
    assert ids[0].format == "csv"


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
    error = _base.error_from_http(status, envelope(status, "SomeType"), {})
    assert type(error) is cls
    assert (error.status, error.type, error.message, error.request_id) == (
        status,
        "SomeType",
        "gateway says no",
        "req-42",
    )


def test_http_error_without_an_envelope_still_names_the_status() -> None:
    error = _base.error_from_http(502, b"<html>bad gateway</html>", {})
    assert isinstance(error, UnavailableError)
    assert "502" in error.message


def test_rate_limit_carries_retry_after() -> None:
    error = _base.error_from_http(429, envelope(429, "RateLimited"), {"Retry-After": "3"})
    assert isinstance(error, RateLimitedError)
    assert error.retry_after_s == 3.0


def detail(status: int, type_: str = "NoSuchGenericTableException") -> list[tuple[str, Any]]:
    msg = common_pb2.ErrorDetail(
        type=type_, message="from detail", http_status=status, request_id="req-7"
    )
    return [("lakegate-error-bin", msg.SerializeToString())]


def test_grpc_error_detail_status_picks_the_class_and_message() -> None:
    error = _base.error_from_grpc(grpc.StatusCode.NOT_FOUND, "details", detail(404), "t")
    assert isinstance(error, NotFoundError)
    assert (error.message, error.type, error.request_id, error.status) == (
        "from detail",
        "NoSuchGenericTableException",
        "req-7",
        404,
    )


def test_grpc_unavailable_with_a_detail_is_an_upstream_outage() -> None:
    error = _base.error_from_grpc(grpc.StatusCode.UNAVAILABLE, "x", detail(503, "Upstream"), "t")
    assert type(error) is UnavailableError


def test_grpc_unavailable_without_a_detail_means_the_gateway_was_not_reached() -> None:
    error = _base.error_from_grpc(grpc.StatusCode.UNAVAILABLE, "connect failed", [], "unix:/x")
    assert isinstance(error, GatewayConnectionError)
    assert "unix:/x" in error.message


@pytest.mark.parametrize(
    ("code", "cls"),
    [
        (grpc.StatusCode.PERMISSION_DENIED, PermissionDeniedError),
        (grpc.StatusCode.UNAUTHENTICATED, UnauthenticatedError),
        (grpc.StatusCode.ALREADY_EXISTS, ConflictError),
        (grpc.StatusCode.INVALID_ARGUMENT, InvalidRequestError),
        (grpc.StatusCode.DEADLINE_EXCEEDED, GatewayTimeoutError),
        (grpc.StatusCode.INTERNAL, InternalError),
    ],
)
def test_grpc_status_without_detail_picks_the_class(code: grpc.StatusCode, cls: type) -> None:
    assert type(_base.error_from_grpc(code, "msg", None, "t")) is cls


def test_grpc_garbled_detail_falls_back_to_the_status() -> None:
    error = _base.error_from_grpc(
        grpc.StatusCode.PERMISSION_DENIED, "msg", [("lakegate-error-bin", b"\xff\xff")], "t"
    )
    assert isinstance(error, PermissionDeniedError)


def test_grpc_rate_limit_reads_retry_after_metadata() -> None:
    error = _base.error_from_grpc(
        grpc.StatusCode.RESOURCE_EXHAUSTED,
        "slow down",
        [*detail(429, "RateLimited"), ("retry-after", "2")],
        "t",
    )
    assert isinstance(error, RateLimitedError)
    assert error.retry_after_s == 2.0


# -- memo ----------------------------------------------------------------------------------------


class FakeClock:
    def __init__(self, now: float) -> None:
        self.t = now

    def now(self) -> float:
        return self.t


def snapshot(expires_in_s: float | None, now: float = NOW) -> TableCredentials:
    expiry = int((now + expires_in_s) * 1000) if expires_in_s is not None else None
    return TableCredentials.from_parts(
        location="s3://w/t",
        credentials=[StorageCredential("s3://w/t", {"k": "v"})],
        expires_at_ms=expiry,
    )


def key(table: str = "t", access: str = "read") -> _base.MemoKey:
    return _base.memo_key("http://gw:1", TableRef("wh", ("ns",), table), access)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("expires_in_s", "elapsed_s", "served"),
    [
        (3600, 0, True),
        (3600, 3299, True),
        (3600, 3300, False),
        (3600, 4000, False),
        (301, 0, True),
        (300, 0, False),
        (None, 0, False),
    ],
)
def test_memo_serves_only_above_the_floor(
    expires_in_s: float | None, elapsed_s: float, served: bool
) -> None:
    clock = FakeClock(NOW)
    memo = CredentialMemo(clock, floor_s=300, max_entries=10)
    creds = snapshot(expires_in_s)
    memo.put(key(), creds)
    clock.t += elapsed_s
    assert (memo.get(key()) is creds) is served


def test_memo_drops_an_entry_once_it_falls_below_the_floor() -> None:
    clock = FakeClock(NOW)
    memo = CredentialMemo(clock, floor_s=300, max_entries=10)
    memo.put(key(), snapshot(3600))
    clock.t += 3400
    assert memo.get(key()) is None
    assert len(memo) == 0


def test_memo_keys_are_case_folded_and_separate_access_modes() -> None:
    memo = CredentialMemo(FakeClock(NOW), floor_s=300, max_entries=10)
    creds = snapshot(3600)
    memo.put(key("Orders"), creds)
    assert memo.get(key("ORDERS")) is creds
    assert memo.get(key("orders", "write")) is None


def test_memo_is_a_bounded_lru() -> None:
    memo = CredentialMemo(FakeClock(NOW), floor_s=300, max_entries=3)
    for name in ("a", "b", "c"):
        memo.put(key(name), snapshot(3600))
    assert memo.get(key("a")) is not None  # a is now the most recent
    memo.put(key("d"), snapshot(3600))
    assert len(memo) == 3
    assert memo.get(key("b")) is None
    assert memo.get(key("a")) is not None


def test_forget_table_drops_both_access_modes() -> None:
    memo = CredentialMemo(FakeClock(NOW), floor_s=300, max_entries=10)
    memo.put(key("t", "read"), snapshot(3600))
    memo.put(key("t", "write"), snapshot(3600))
    memo.put(key("other"), snapshot(3600))
    memo.forget_table("http://gw:1", TableRef("wh", ("ns",), "T"))
    assert len(memo) == 1
