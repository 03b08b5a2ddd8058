"""_proto.py: proto answers to value types, gRPC status and ErrorDetail trailers to errors."""

from __future__ import annotations

from typing import Any

import grpc
import pytest

from lakegate.v1 import catalog_pb2, common_pb2, credentials_pb2
from lakegate_client import (
    ConflictError,
    GatewayConnectionError,
    GatewayTimeoutError,
    InternalError,
    InvalidRequestError,
    NotFoundError,
    PermissionDeniedError,
    RateLimitedError,
    UnauthenticatedError,
    UnavailableError,
    _proto,
)
from lakegate_client._models import TableRef

REF = TableRef("my wh", ("a", "b/c"), "t 1")


def test_proto_answers_are_parsed_like_json_ones() -> None:
    msg = credentials_pb2.GetTableCredentialsResponse(
        warehouse_id="uuid",
        location="s3://w/t",
        expires_at_ms=1_800_000_000_000,
        remaining_seconds=12.0,
        outcome=common_pb2.CACHE_OUTCOME_STALE,
        credentials=[common_pb2.StorageCredential(prefix="s3://w/t", config={"k": "v"})],
    )
    creds = _proto.credentials_from_proto(msg, REF, "read")
    assert (creds.outcome, creds.config, creds.served_remaining_s) == ("stale", {"k": "v"}, 12.0)
    page = catalog_pb2.ListTablesResponse(
        identifiers=[common_pb2.TableIdentifier(namespace=["n"], name="x", format="csv", id="1")],
        next_page_token="",
    )
    ids, token = _proto.identifiers_from_proto(page)
    assert token is None
    assert ids[0].namespace == ("n",)
    assert ids[0].format == "csv"


def detail(status: int, type_: str = "NoSuchGenericTableException") -> list[tuple[str, Any]]:
    msg = common_pb2.ErrorDetail(
        type=type_, message="from detail", http_status=status, request_id="req-7"
    )
    return [("lakegate-error-bin", msg.SerializeToString())]


def test_grpc_error_detail_status_picks_the_class_and_message() -> None:
    error = _proto.error_from_grpc(grpc.StatusCode.NOT_FOUND, "details", detail(404), "t")
    assert isinstance(error, NotFoundError)
    assert (error.message, error.type, error.request_id, error.status) == (
        "from detail",
        "NoSuchGenericTableException",
        "req-7",
        404,
    )


def test_grpc_unavailable_with_a_detail_is_an_upstream_outage() -> None:
    error = _proto.error_from_grpc(grpc.StatusCode.UNAVAILABLE, "x", detail(503, "Upstream"), "t")
    assert type(error) is UnavailableError


def test_grpc_unavailable_without_a_detail_means_the_gateway_was_not_reached() -> None:
    error = _proto.error_from_grpc(grpc.StatusCode.UNAVAILABLE, "connect failed", [], "unix:/x")
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
    assert type(_proto.error_from_grpc(code, "msg", None, "t")) is cls


def test_grpc_garbled_detail_falls_back_to_the_status() -> None:
    error = _proto.error_from_grpc(
        grpc.StatusCode.PERMISSION_DENIED, "msg", [("lakegate-error-bin", b"\xff\xff")], "t"
    )
    assert isinstance(error, PermissionDeniedError)


def test_grpc_rate_limit_reads_retry_after_metadata() -> None:
    error = _proto.error_from_grpc(
        grpc.StatusCode.RESOURCE_EXHAUSTED,
        "slow down",
        [*detail(429, "RateLimited"), ("retry-after", "2")],
        "t",
    )
    assert isinstance(error, RateLimitedError)
    assert error.retry_after_s == 2.0
