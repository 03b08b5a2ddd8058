"""Fixtures for the surface tests: a fake service, an HTTP client, a gRPC server.

`clock` (tests/fakes/clock.FakeClock) and `metrics` are the suite-wide fixtures of
tests/conftest.py.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import grpc
import pytest
from aiohttp.test_utils import TestClient, TestServer

from gateway.metrics import Metrics
from gateway.service.signing import SigningService
from gateway.surfaces.accounting import Recorder
from gateway.surfaces.callers import CallerAuthenticator, NoCallerAuth
from gateway.surfaces.grpc_server import GrpcSurface
from gateway.surfaces.http_app import HttpDeps, build_http_app
from gateway.surfaces.ingress import Gate, RateLimiter
from gateway.surfaces.policy import CallerPolicy
from lakegate.v1 import catalog_pb2_grpc, credentials_pb2_grpc
from tests.fakes.clock import FakeClock
from tests.unit.surfaces.fake_operations import FakeOperations, RotatingOperations

MakeClient = Callable[..., Awaitable[TestClient]]

# What an unmodified engine (pyiceberg, pylakekeeper) sends: some bearer token (caller auth is
# off unless a test installs it), plus Iceberg's delegation header when it wants credentials.
AUTH = {"Authorization": "Bearer engine-session-token"}
VENDED = {**AUTH, "X-Iceberg-Access-Delegation": "vended-credentials"}


@pytest.fixture
def fake_ops() -> FakeOperations:
    ops = FakeOperations()
    ops.add_table(("demo_ns",), "orders")
    ops.add_table(("team_a",), "sales")
    ops.add_table(("team_b",), "payroll")
    return ops


@pytest.fixture
def rotating_ops() -> RotatingOperations:
    ops = RotatingOperations()
    ops.add_table(("demo_ns",), "orders")
    return ops


def build_gate(
    ops: FakeOperations,
    metrics: Metrics,
    clock: FakeClock,
    *,
    auth: CallerAuthenticator | None = None,
    policy: CallerPolicy | None = None,
    rate: tuple[float, int] | None = None,
    allow_project_header: bool = False,
    failures: object = None,
) -> Gate:
    limiter = RateLimiter(rate[0], rate[1], clock) if rate else None
    extra: dict[str, object] = {"allow_project_header": True} if allow_project_header else {}
    if failures is not None:
        extra["failures"] = failures
    return Gate(auth or NoCallerAuth(), policy or CallerPolicy(None), limiter, ops, metrics,
                **extra)  # type: ignore[arg-type]


@pytest.fixture
async def make_client(
    fake_ops: FakeOperations, metrics: Metrics, clock: FakeClock
) -> AsyncIterator[MakeClient]:
    clients: list[TestClient] = []

    async def make(*, max_body_bytes: int = 1 << 20, max_page_size: int = 1000,
                   ops: FakeOperations | None = None, signing: bool = False,
                   **gate_kwargs: object) -> TestClient:
        ops = ops or fake_ops
        gate = build_gate(ops, metrics, clock, **gate_kwargs)  # type: ignore[arg-type]
        signer = SigningService(ops, clock, asyncio.ensure_future, metrics=metrics) \
            if signing else None
        deps = HttpDeps(ops, gate, Recorder(metrics, clock), metrics, clock,
                        max_body_bytes, max_page_size, signing=signer)
        client = TestClient(TestServer(build_http_app(deps)))
        await client.start_server()
        clients.append(client)
        return client

    yield make
    for client in clients:
        await client.close()


def count(metrics: Metrics, surface: str, kind: str, result: str) -> float:
    """The exact value of lakegate_requests_total for one label set."""
    value = metrics.registry.get_sample_value(
        "lakegate_requests_total", {"surface": surface, "kind": kind, "result": result}
    )
    return value or 0.0


def total_requests(metrics: Metrics) -> float:
    return sum(
        s.value
        for fam in metrics.registry.collect()
        if fam.name == "lakegate_requests"
        for s in fam.samples
        if s.name == "lakegate_requests_total"
    )


class Server:
    """A running gRPC surface and stubs on a channel to it."""

    def __init__(self, surface: GrpcSurface, path: Path) -> None:
        self.surface = surface
        self.channel = grpc.aio.insecure_channel(f"unix:{path}")
        self.creds = credentials_pb2_grpc.CredentialServiceStub(self.channel)
        self.catalog = catalog_pb2_grpc.CatalogServiceStub(self.channel)


@pytest.fixture
async def server_factory(
    tmp_path: Path, fake_ops: FakeOperations, metrics: Metrics, clock: FakeClock
) -> AsyncIterator:
    started: list[Server] = []

    async def make(**gate_kwargs: object) -> Server:
        gate = build_gate(fake_ops, metrics, clock, **gate_kwargs)  # type: ignore[arg-type]
        surface = GrpcSurface(fake_ops, gate, Recorder(metrics, clock),
                              max_message_bytes=64 * 1024)
        path = tmp_path / f"grpc{len(started)}.sock"
        surface.bind_uds(str(path))
        await surface.server.start()
        server = Server(surface, path)
        started.append(server)
        return server

    yield make
    for s in started:
        await s.channel.close()
        await s.surface.server.stop(0)
