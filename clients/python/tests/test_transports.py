"""The HTTP (_http.py) and gRPC (_grpc.py) transports, sync and async, over TCP and UDS, against a
real in-test server (fake_gateway_server.py in a subprocess)."""

from __future__ import annotations

import socket
from pathlib import Path
from typing import Any

import pytest

from lakegate_client import (
    AsyncClient,
    Client,
    ConflictError,
    GatewayConnectionError,
    GatewayTimeoutError,
    InternalError,
    LakegateError,
    NotFoundError,
    PermissionDeniedError,
    RateLimitedError,
    UnavailableError,
)

FORMS = ["http", "http+uds", "grpc", "grpc+uds"]
SCRIPTED = [
    ("missing", NotFoundError, 404, "NoSuchGenericTableException"),
    ("denied", PermissionDeniedError, 403, "PermissionDenied"),
    ("limited", RateLimitedError, 429, "RateLimited"),
    ("broken", InternalError, 500, "InternalError"),
    ("down", UnavailableError, 503, "UpstreamUnavailable"),
]


@pytest.fixture(params=FORMS)
def url(request: pytest.FixtureRequest, fake_gateway: Any) -> str:
    return fake_gateway.urls[request.param]  # type: ignore[no-any-return]


def test_credentials_are_parsed_and_merged_by_longest_prefix(url: str) -> None:
    with Client(url, warehouse="demo", timeout_s=5, memo=False) as client:
        creds = client.credentials("a.b", "orders", access="write")
    assert creds.location == "s3://bucket/a/b/orders"
    assert creds.config["s3.region"] == "eu-west-1"  # the table's credential, not the bucket's
    assert creds.access == "write"
    assert creds.warehouse_id == "wh-uuid"
    assert creds.outcome in ("hit", "miss")
    assert creds.remaining_s is not None
    assert 3500 < creds.remaining_s <= 3600
    assert creds.lance_storage_options()["aws_endpoint"] == "http://127.0.0.1:9"


def test_catalog_operations_round_trip(url: str, fake_gateway: Any) -> None:
    with Client(url, warehouse="demo", timeout_s=5) as client:
        loaded = client.load("ns", "t", vended=True)
        assert (loaded.format, loaded.base_location) == ("parquet", "s3://bucket/ns/t")
        assert loaded.credentials is not None
        assert loaded.credentials.storage == "s3"
        assert client.load("ns", "t").credentials is None
        assert [t.name for t in client.list("ns")] == ["a", "b", "c"]
        assert client.create("ns", "new", format="delta").format == "delta"
        assert len(fake_gateway.stats()["last"]["idempotency-key"]) == 36
        with pytest.raises(ConflictError):
            client.create("ns", "exists", format="delta")
        client.drop("ns", "t")
        client.rename("ns", "t", "ns2", "u")


@pytest.mark.parametrize(("table", "cls", "status", "type_"), SCRIPTED)
def test_gateway_errors_keep_status_type_message_and_request_id(
    url: str, table: str, cls: type[LakegateError], status: int, type_: str
) -> None:
    with Client(url, warehouse="demo", timeout_s=5) as client, pytest.raises(cls) as info:
        client.credentials("ns", table)
    error = info.value
    assert (error.status, error.type) == (status, type_)
    assert f"table {table}" in error.message
    assert error.request_id == "0b7e3f5c-0000-4000-8000-000000000001"
    if cls is RateLimitedError:
        assert error.retry_after_s == 7.0  # type: ignore[attr-defined]


def test_every_call_is_bounded_by_the_timeout(url: str) -> None:
    with Client(url, warehouse="demo", timeout_s=0.3) as client, pytest.raises(GatewayTimeoutError):
        client.credentials("ns", "slow")


def test_caller_authentication_headers_reach_the_gateway(url: str, fake_gateway: Any) -> None:
    with Client(url, warehouse="demo", timeout_s=5, memo=False) as client:
        client.credentials("ns", "t")
    assert fake_gateway.stats()["last"]["x-lakegate-request"] == "1"
    assert fake_gateway.stats()["last"]["authorization"] == ""
    with Client(url, warehouse="demo", token="caller-tok", memo=False) as client:  # noqa: S106
        client.credentials("ns", "t")
    assert fake_gateway.stats()["last"]["authorization"] == "Bearer caller-tok"


def test_missing_socket_is_a_connection_error(tmp_path: Path) -> None:
    for url in (f"unix:{tmp_path}/none.sock", f"grpc+unix:{tmp_path}/none.sock"):
        with Client(url, warehouse="demo", timeout_s=2) as client:
            with pytest.raises(GatewayConnectionError, match=r"none\.sock"):
                client.credentials("ns", "t")


def test_refused_tcp_port_is_a_connection_error() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # bound but not listening: connections are refused
        for url in (f"http://127.0.0.1:{port}", f"grpc://127.0.0.1:{port}"):
            with Client(url, warehouse="demo", timeout_s=2) as client:
                with pytest.raises(GatewayConnectionError):
                    client.credentials("ns", "t")


async def test_async_client_over_every_form(url: str) -> None:
    async with AsyncClient(url, warehouse="demo", timeout_s=5) as client:
        creds = await client.credentials(["a", "b"], "orders")
        assert creds.location == "s3://bucket/a/b/orders"
        assert (await client.credentials(["a", "b"], "orders")).outcome == "memo"
        loaded = await client.load("ns", "t", vended=True)
        assert loaded.credentials is not None
        assert [t.name for t in await client.list("ns")] == ["a", "b", "c"]
        await client.create("ns", "x", format="lance")
        await client.drop("ns", "x")
        await client.rename("ns", "x", "ns", "y")
        with pytest.raises(NotFoundError):
            await client.credentials("ns", "missing")


async def test_async_timeout_is_bounded(url: str) -> None:
    async with AsyncClient(url, warehouse="demo", timeout_s=0.3) as client:
        with pytest.raises(GatewayTimeoutError):
            await client.credentials("ns", "slow")


async def test_async_missing_socket_is_a_connection_error(tmp_path: Path) -> None:
    for url in (f"unix:{tmp_path}/none.sock", f"grpc+unix:{tmp_path}/none.sock"):
        async with AsyncClient(url, warehouse="demo", timeout_s=2) as client:
            with pytest.raises(GatewayConnectionError):
                await client.credentials("ns", "t")
