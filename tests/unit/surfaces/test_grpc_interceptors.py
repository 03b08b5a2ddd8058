"""The gRPC error boundary: a retry hint travels as `retry-after` trailing metadata, like HTTP."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import grpc
import pytest

import lakegate_client
from gateway.errors import NotFoundError, UnavailableError
from gateway.metrics import Metrics
from gateway.surfaces.accounting import Recorder
from gateway.surfaces.grpc_interceptors import ERROR_DETAIL_KEY
from gateway.surfaces.grpc_server import GrpcSurface
from lakegate.v1 import common_pb2, credentials_pb2, credentials_pb2_grpc
from tests.unit.surfaces.conftest import build_gate
from tests.unit.surfaces.fake_operations import FakeClock, FakeOperations

ORDERS = common_pb2.TableRef(warehouse="demo", namespace=["demo_ns"], name="orders")
REQUEST = credentials_pb2.GetTableCredentialsRequest(table=ORDERS)


@pytest.fixture
async def grpc_path(
    tmp_path: Path, fake_ops: FakeOperations, metrics: Metrics, clock: FakeClock
) -> AsyncIterator[Path]:
    """A real grpc.aio server on a UDS; one token per caller per second, burst 1."""
    gate = build_gate(fake_ops, metrics, clock, rate=(1.0, 1))
    surface = GrpcSurface(fake_ops, gate, Recorder(metrics, clock),
                          max_message_bytes=64 * 1024)
    path = tmp_path / "grpc.sock"
    surface.bind_uds(str(path))
    await surface.server.start()
    yield path
    await surface.server.stop(0)


async def _failed_call(path: Path) -> grpc.aio.AioRpcError:
    async with grpc.aio.insecure_channel(f"unix:{path}") as channel:
        stub = credentials_pb2_grpc.CredentialServiceStub(channel)
        with pytest.raises(grpc.aio.AioRpcError) as info:
            await stub.GetTableCredentials(REQUEST, timeout=5)
        return info.value


async def test_rate_limited_caller_gets_resource_exhausted_with_retry_after(
    grpc_path: Path, fake_ops: FakeOperations
) -> None:
    async with grpc.aio.insecure_channel(f"unix:{grpc_path}") as channel:
        stub = credentials_pb2_grpc.CredentialServiceStub(channel)
        await stub.GetTableCredentials(REQUEST, timeout=5)  # the burst of one
        with pytest.raises(grpc.aio.AioRpcError) as info:
            await stub.GetTableCredentials(REQUEST, timeout=5)
    assert info.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    trailers = dict(info.value.trailing_metadata())
    assert trailers["retry-after"] == "1"  # same value as the HTTP Retry-After header
    assert common_pb2.ErrorDetail.FromString(trailers[ERROR_DETAIL_KEY]).http_status == 429
    assert fake_ops.calls["get_credentials"] == 1


async def test_lakegate_client_reads_retry_after_into_the_error(grpc_path: Path) -> None:
    async with lakegate_client.AsyncClient(f"grpc+unix:{grpc_path}", warehouse="demo",
                                           timeout_s=5, memo=False) as client:
        await client.credentials("demo_ns", "orders")
        with pytest.raises(lakegate_client.RateLimitedError) as info:
            await client.credentials("demo_ns", "orders")
    assert info.value.retry_after_s == 1.0
    assert info.value.status == 429


async def test_upstream_retry_hint_is_rounded_up_to_whole_seconds(
    grpc_path: Path, fake_ops: FakeOperations
) -> None:
    fake_ops.errors["get_credentials"] = UnavailableError("catalog down", retry_after_s=2.2)
    error = await _failed_call(grpc_path)
    assert error.code() == grpc.StatusCode.UNAVAILABLE
    assert dict(error.trailing_metadata())["retry-after"] == "3"


async def test_errors_without_a_hint_carry_no_retry_after(
    grpc_path: Path, fake_ops: FakeOperations
) -> None:
    fake_ops.errors["get_credentials"] = NotFoundError("Generic table not found")
    error = await _failed_call(grpc_path)
    assert error.code() == grpc.StatusCode.NOT_FOUND
    trailers = dict(error.trailing_metadata())
    assert ERROR_DETAIL_KEY in trailers
    assert "retry-after" not in trailers
