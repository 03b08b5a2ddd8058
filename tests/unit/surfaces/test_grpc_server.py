"""GrpcSurface: every lakegate.v1 method is served (registered with the core), nothing else."""

from __future__ import annotations

from pathlib import Path

import grpc
import pytest

from gateway.surfaces.grpc_servicers import SERVICES
from tests.unit.app_harness import app_for, running, settings_for
from tests.unit.surfaces.fake_operations import FakeOperations


async def _code(channel: grpc.aio.Channel, path: str) -> grpc.StatusCode:
    call = channel.unary_unary(path, request_serializer=None, response_deserializer=None)
    try:
        await call(b"", timeout=10)
    except grpc.aio.AioRpcError as err:
        return err.code()
    return grpc.StatusCode.OK


async def test_every_method_of_both_services_is_served_and_unknown_ones_are_not(
    tmp_path: Path, fake_ops: FakeOperations
) -> None:
    async with running(app_for(settings_for(tmp_path), fake_ops)):
        async with grpc.aio.insecure_channel(f"unix:{tmp_path / 'grpc.sock'}") as channel:
            for service, methods in SERVICES.items():
                for method in methods:
                    code = await _code(channel, f"/{service}/{method}")
                    assert code is not grpc.StatusCode.UNIMPLEMENTED, (service, method)
                assert await _code(channel, f"/{service}/NoSuchMethod") is (
                    grpc.StatusCode.UNIMPLEMENTED)
            assert await _code(channel, "/lakegate.v1.NoSuchService/GetTableCredentials") is (
                grpc.StatusCode.UNIMPLEMENTED)


async def test_the_health_service_still_answers(
    tmp_path: Path, fake_ops: FakeOperations
) -> None:
    async with running(app_for(settings_for(tmp_path), fake_ops)):
        async with grpc.aio.insecure_channel(f"unix:{tmp_path / 'grpc.sock'}") as channel:
            assert await _code(channel, "/grpc.health.v1.Health/Check") is grpc.StatusCode.OK


async def test_calls_in_flight_counts_the_calls_the_server_is_handling(
    tmp_path: Path, fake_ops: FakeOperations
) -> None:
    """`calls_in_flight` reads grpc.aio's task per call (its name is grpc's, not ours): a grpc
    release that renamed it would leave the helper threads normal under load (0 here)."""
    import asyncio

    from lakegate.v1 import common_pb2, credentials_pb2, credentials_pb2_grpc

    fake_ops.hold = asyncio.Event()
    app = app_for(settings_for(tmp_path), fake_ops)
    async with running(app):
        surface = app._grpc
        assert surface is not None
        assert surface.calls_in_flight() == 0
        async with grpc.aio.insecure_channel(f"unix:{tmp_path / 'grpc.sock'}") as channel:
            stub = credentials_pb2_grpc.CredentialServiceStub(channel)
            request = credentials_pb2.GetTableCredentialsRequest(
                table=common_pb2.TableRef(warehouse="demo", namespace=["demo_ns"], name="orders"))
            calls = [stub.GetTableCredentials(request, timeout=10) for _ in range(5)]
            async with asyncio.timeout(10):
                while fake_ops.calls["get_credentials"] < 5:  # noqa: ASYNC110 - a count
                    await asyncio.sleep(0.01)
                assert surface.calls_in_flight() == 5
                fake_ops.hold.set()
                await asyncio.gather(*calls)
                while surface.calls_in_flight():  # noqa: ASYNC110 - grpc's tasks end
                    await asyncio.sleep(0.01)


async def test_calls_in_flight_walks_no_task_when_no_call_started(
    tmp_path: Path, fake_ops: FakeOperations, monkeypatch: pytest.MonkeyPatch
) -> None:
    import asyncio

    app = app_for(settings_for(tmp_path), fake_ops)
    async with running(app):
        surface = app._grpc
        assert surface is not None

        def walked() -> set[asyncio.Task[object]]:
            raise AssertionError("walked every task of the loop with no gRPC call started")

        monkeypatch.setattr(asyncio, "all_tasks", walked)
        for _ in range(3):
            assert surface.calls_in_flight() == 0
