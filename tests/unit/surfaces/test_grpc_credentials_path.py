"""GetTableCredentials as registered (`CredentialServicer.credentials_behaviour`): raw bytes in,
pre-serialized bytes out, over the real Core on the FakeCatalog and a fake clock.

Its memos (validated requests by their bytes, answer bodies by table and served set) never
decide what is served: the service does, on every call, so a credential at the serve floor or
an invalidated one is never answered from them.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import grpc
import pytest

from gateway.metrics import Metrics
from gateway.models import AccessMode, RequestContext, TableRef
from gateway.service import build_core
from gateway.service.wiring import Core
from gateway.surfaces.accounting import Recorder
from gateway.surfaces.grpc_errors import grpc_code_of
from gateway.surfaces.grpc_interceptors import ERROR_DETAIL_KEY
from gateway.surfaces.grpc_server import GrpcSurface
from gateway.surfaces.grpc_servicers import CREDENTIALS_METHOD, credentials_pb, method_handlers
from lakegate.v1 import common_pb2, credentials_pb2, credentials_pb2_grpc
from tests.fakes.catalog import FakeCatalog, FakeIdP
from tests.fakes.clock import FakeClock
from tests.fakes.rng import seeded
from tests.fakes.settings import make_settings
from tests.fakes.tasks import FakeTaskRegistry
from tests.unit.surfaces.conftest import build_gate, count
from tests.unit.surfaces.fake_operations import FakeOperations

METHOD = f"/{CREDENTIALS_METHOD[0]}/{CREDENTIALS_METHOD[1]}"
ORDERS = common_pb2.TableRef(warehouse="demo", namespace=["ns"], name="orders")
REQUEST = credentials_pb2.GetTableCredentialsRequest(table=ORDERS)
REF = TableRef("demo", ("ns",), "orders")
VENDS = "load_generic_table_credentials"


class Served:
    """A gRPC surface over a real Core, and a raw-bytes call to GetTableCredentials."""

    def __init__(self, core: Core, channel: grpc.aio.Channel) -> None:
        self.core = core
        self.channel = channel
        self.raw = channel.unary_unary(METHOD)  # no (de)serializer: bytes both ways
        self.creds = credentials_pb2_grpc.CredentialServiceStub(channel)

    async def answer(self) -> bytes:
        return bytes(await self.raw(REQUEST.SerializeToString(), timeout=5))

    async def message(self) -> credentials_pb2.GetTableCredentialsResponse:
        return credentials_pb2.GetTableCredentialsResponse.FromString(await self.answer())


@pytest.fixture
async def served(tmp_path: Path, clock: FakeClock, metrics: Metrics
                 ) -> AsyncIterator[Callable[[], Served]]:
    catalog = FakeCatalog(clock, credential_lifetime_s=3600)
    catalog.add_table(("ns",), "orders")
    registry = FakeTaskRegistry()
    core = build_core(make_settings(), metrics, registry.spawn, clock,
                      transport=catalog.transport(FakeIdP(expires_in=3600, clock=clock)),
                      rng=seeded(2))
    await core.start()
    gate = build_gate(core.service, metrics, clock)  # type: ignore[arg-type]
    surface = GrpcSurface(core.service, gate, Recorder(metrics, clock),
                          max_message_bytes=64 * 1024)
    path = tmp_path / "grpc.sock"
    surface.bind_uds(str(path))
    await surface.server.start()
    channel = grpc.aio.insecure_channel(f"unix:{path}")
    it = Served(core, channel)
    it.catalog = catalog  # type: ignore[attr-defined]
    yield lambda: it
    await channel.close()
    await surface.server.stop(0)
    await core.close()
    await registry.cancel_all()


async def test_the_answer_is_the_message_of_the_service_lookup_byte_for_byte(
    served: Callable[[], Served], clock: FakeClock
) -> None:
    """Same state (the fake clock stands still), same bytes as serializing the whole message
    the service's lookup describes: the splice of the memoized body is exact."""
    s = served()
    await s.answer()  # the miss that fills the cache
    for _ in range(2):  # the hit that renders the body, the hit served from it
        answer = await s.answer()
        lookup = s.core.service.credentials_now(REF, AccessMode.READ, RequestContext("r"))
        assert lookup is not None
        assert answer == credentials_pb(lookup).SerializeToString()
        clock.advance(7)  # a different remaining_seconds per call, still exact


async def test_at_the_serve_floor_the_memoized_body_is_not_served(
    served: Callable[[], Served], clock: FakeClock
) -> None:
    s = served()
    first = await s.message()
    assert (await s.message()).outcome == common_pb2.CACHE_OUTCOME_HIT
    clock.advance(first.remaining_seconds - 300 + 1)  # 299 s left: under the 300 s floor
    fresh = await s.message()
    assert fresh.outcome == common_pb2.CACHE_OUTCOME_MISS
    assert fresh.remaining_seconds > 300
    assert fresh.credentials[0].config["s3.access-key-id"] != (
        first.credentials[0].config["s3.access-key-id"])
    assert s.catalog.calls[VENDS] == 2  # type: ignore[attr-defined]


async def test_invalidation_drops_the_answer(served: Callable[[], Served]) -> None:
    s = served()
    first = await s.message()
    assert (await s.message()).credentials == first.credentials
    await s.creds.InvalidateCredentials(
        credentials_pb2.InvalidateCredentialsRequest(table=ORDERS), timeout=5)
    again = await s.message()
    assert again.outcome == common_pb2.CACHE_OUTCOME_MISS
    assert again.credentials[0].config["s3.access-key-id"] != (
        first.credentials[0].config["s3.access-key-id"])


async def test_registered_bytes_in_bytes_out(
    fake_ops: FakeOperations, metrics: Metrics, clock: FakeClock
) -> None:
    """No deserializer and no serializer: grpc hands the request bytes over and sends the
    answer bytes as they are (a Python call fewer each way, and no decode of a memoized
    request)."""
    gate = build_gate(fake_ops, metrics, clock)
    handler = method_handlers(fake_ops, gate, Recorder(metrics, clock))[
        CREDENTIALS_METHOD[0]][CREDENTIALS_METHOD[1]]
    assert handler.request_deserializer is None
    assert handler.response_serializer is None


async def test_bad_bytes_are_invalid_argument_on_every_call(server_factory: Any,
                                                             metrics: Metrics) -> None:
    s = await server_factory()
    raw = s.channel.unary_unary(METHOD)
    for _ in range(2):  # never remembered
        with pytest.raises(grpc.aio.AioRpcError) as info:
            await raw(b"\xff\xff\xff", timeout=5)
        assert info.value.code() is grpc.StatusCode.INVALID_ARGUMENT
        assert "not a valid protobuf message" in (info.value.details() or "")
        keys = {k for k, _ in info.value.trailing_metadata() or ()}
        assert {ERROR_DETAIL_KEY, "x-request-id"} <= keys
    assert count(metrics, "grpc", "credential", "error") == 2


async def test_a_remembered_request_still_has_its_project_checked(
    server_factory: Any, metrics: Metrics
) -> None:
    """The request memo holds the validated fields only: the same bytes with a project header
    the gateway does not serve are refused as before, and audited as a refusal."""
    s = await server_factory()
    request = credentials_pb2.GetTableCredentialsRequest(
        table=common_pb2.TableRef(warehouse="demo", namespace=["demo_ns"], name="orders"))
    await s.creds.GetTableCredentials(request, timeout=5)
    with pytest.raises(grpc.aio.AioRpcError) as info:
        await s.creds.GetTableCredentials(request, metadata=(("x-project-id", "other"),),
                                          timeout=5)
    assert info.value.code() is grpc.StatusCode.PERMISSION_DENIED
    assert count(metrics, "grpc", "credential", "denied") == 1
    assert count(metrics, "grpc", "credential", "hit") + count(
        metrics, "grpc", "credential", "miss") == 1


async def test_the_same_errors_and_trailers_as_every_other_method(
    server_factory: Any, fake_ops: FakeOperations
) -> None:
    """A table the catalog does not have: NOT_FOUND with the lakegate-error-bin detail and the
    caller's request id, the mapping every guarded method uses."""
    s = await server_factory()
    request = credentials_pb2.GetTableCredentialsRequest(
        table=common_pb2.TableRef(warehouse="demo", namespace=["demo_ns"], name="absent"))
    with pytest.raises(grpc.aio.AioRpcError) as info:
        await s.creds.GetTableCredentials(request, metadata=(("x-request-id", "req-42"),),
                                          timeout=5)
    err = info.value
    trailers = dict(err.trailing_metadata() or ())
    detail = common_pb2.ErrorDetail.FromString(trailers[ERROR_DETAIL_KEY])
    assert trailers["x-request-id"] == "req-42"
    assert detail.request_id == "req-42"
    assert detail.http_status == 404
    assert err.details() == f"{detail.type}: {detail.message}"
    from gateway.errors import NotFoundError

    assert err.code() is grpc_code_of(NotFoundError("x")) is grpc.StatusCode.NOT_FOUND


async def test_a_remembered_request_keeps_its_expected_identity(
    server_factory: Any, fake_ops: FakeOperations
) -> None:
    """The expected identity is part of the remembered request: every call with it asks the
    service with it (never the hit path that checks none), and one without it asks without."""
    s = await server_factory()
    table = common_pb2.TableRef(warehouse="demo", namespace=["demo_ns"], name="orders")
    expecting = credentials_pb2.GetTableCredentialsRequest(table=table, table_id="ABC")
    for _ in range(2):
        await s.creds.GetTableCredentials(expecting, timeout=5)
    await s.creds.GetTableCredentials(
        credentials_pb2.GetTableCredentialsRequest(table=table), timeout=5)
    assert [e.table_id if e else None for e in fake_ops.expects] == ["abc", "abc", None]
