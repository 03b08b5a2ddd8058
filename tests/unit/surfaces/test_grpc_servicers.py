"""The gRPC surface on a real grpc.aio server over a temp UDS, with a fake service."""

from __future__ import annotations

from pathlib import Path

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from gateway.errors import TableIdentityMismatchError, UnavailableError
from gateway.identity import ExpectedIdentity
from gateway.metrics import Metrics
from gateway.models import AccessMode, Outcome, RequestContext, TableRef
from gateway.surfaces.accounting import Recorder
from gateway.surfaces.callers import StaticTokenCallerAuth
from gateway.surfaces.grpc_interceptors import ERROR_DETAIL_KEY
from gateway.surfaces.grpc_server import GrpcSurface
from gateway.surfaces.grpc_servicers import (
    _OUTCOMES,
    _pb_fields,
    _pb_identity_ttl,
    credentials_pb,
    credentials_pb_parts,
)
from gateway.surfaces.policy import CallerPolicy, parse_rules
from gateway.surfaces.render import RenderedBody
from lakegate.v1 import (
    catalog_pb2,
    common_pb2,
    credentials_pb2,
    credentials_pb2_grpc,
)
from tests.fakes.clock import FakeClock
from tests.unit.surfaces.conftest import build_gate, count
from tests.unit.surfaces.fake_operations import (
    ROTATED_KEYS,
    WAREHOUSE,
    FakeOperations,
    RotatingOperations,
)

ORDERS = common_pb2.TableRef(warehouse="demo", namespace=["demo_ns"], name="orders")


async def test_get_credentials_maps_outcome_and_counts_once(
    server_factory, fake_ops: FakeOperations, metrics: Metrics
) -> None:
    fake_ops.outcome = Outcome.HIT
    s = await server_factory()
    resp = await s.creds.GetTableCredentials(
        credentials_pb2.GetTableCredentialsRequest(table=ORDERS), timeout=5)
    assert resp.warehouse_id == WAREHOUSE.id
    assert resp.outcome == common_pb2.CACHE_OUTCOME_HIT
    assert resp.access == common_pb2.ACCESS_MODE_READ
    assert resp.remaining_seconds == 3600.0
    assert resp.HasField("identity_ttl_seconds")
    assert resp.identity_ttl_seconds == 30.0
    assert resp.credentials[0].config["s3.access-key-id"].startswith("ASIA")
    assert count(metrics, "grpc", "credential", "hit") == 1


async def test_not_found_maps_to_status_and_error_detail(server_factory) -> None:
    s = await server_factory()
    missing = common_pb2.TableRef(warehouse="demo", namespace=["demo_ns"], name="nope")
    with pytest.raises(grpc.aio.AioRpcError) as info:
        await s.creds.GetTableCredentials(
            credentials_pb2.GetTableCredentialsRequest(table=missing), timeout=5)
    assert info.value.code() == grpc.StatusCode.NOT_FOUND
    detail = dict(info.value.trailing_metadata())[ERROR_DETAIL_KEY]
    parsed = common_pb2.ErrorDetail.FromString(detail)
    assert parsed.type == "NoSuchGenericTableException"
    assert parsed.http_status == 404


async def test_unavailable_maps_to_unavailable(server_factory, fake_ops: FakeOperations) -> None:
    fake_ops.errors["get_credentials"] = UnavailableError("catalog down")
    s = await server_factory()
    with pytest.raises(grpc.aio.AioRpcError) as info:
        await s.creds.GetTableCredentials(
            credentials_pb2.GetTableCredentialsRequest(table=ORDERS), timeout=5)
    assert info.value.code() == grpc.StatusCode.UNAVAILABLE


@pytest.mark.parametrize(
    "table",
    [
        common_pb2.TableRef(warehouse="", namespace=["demo_ns"], name="orders"),
        common_pb2.TableRef(warehouse="demo", namespace=[], name="orders"),
        common_pb2.TableRef(warehouse="demo", namespace=["a\x00"], name="orders"),
        common_pb2.TableRef(warehouse="demo", namespace=["demo_ns"], name=""),
        common_pb2.TableRef(warehouse="demo", namespace=["demo_ns"], name=".."),
    ],
)
async def test_bad_fields_are_invalid_argument(
    server_factory, fake_ops: FakeOperations, metrics: Metrics, table
) -> None:
    s = await server_factory()
    with pytest.raises(grpc.aio.AioRpcError) as info:
        await s.creds.GetTableCredentials(
            credentials_pb2.GetTableCredentialsRequest(table=table), timeout=5)
    assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert fake_ops.calls["get_credentials"] == 0
    assert count(metrics, "grpc", "credential", "error") == 1


async def test_unknown_access_enum_is_invalid_argument(server_factory) -> None:
    s = await server_factory()
    with pytest.raises(grpc.aio.AioRpcError) as info:
        await s.creds.GetTableCredentials(
            credentials_pb2.GetTableCredentialsRequest(table=ORDERS, access=7), timeout=5)
    assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT


async def test_bad_protobuf_bytes_are_invalid_argument(
    server_factory, fake_ops: FakeOperations
) -> None:
    s = await server_factory()
    raw = s.channel.unary_unary(
        "/lakegate.v1.CredentialService/GetTableCredentials",
        request_serializer=lambda b: b, response_deserializer=lambda b: b,
    )
    with pytest.raises(grpc.aio.AioRpcError) as info:
        await raw(b"\xff\xff\xff\xff\x0f garbage", timeout=5)
    assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert fake_ops.calls["get_credentials"] == 0


async def test_oversized_message_is_refused(server_factory) -> None:
    s = await server_factory()
    huge = common_pb2.TableRef(warehouse="demo", namespace=["demo_ns"], name="x" * 100_000)
    with pytest.raises(grpc.aio.AioRpcError) as info:
        await s.creds.GetTableCredentials(
            credentials_pb2.GetTableCredentialsRequest(table=huge), timeout=5)
    assert info.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED


async def test_token_mode_requires_and_checks_authorization(
    server_factory, fake_ops: FakeOperations, metrics: Metrics
) -> None:
    s = await server_factory(auth=StaticTokenCallerAuth({"tok-alice-123": "alice"}))
    req = credentials_pb2.GetTableCredentialsRequest(table=ORDERS)
    with pytest.raises(grpc.aio.AioRpcError) as info:
        await s.creds.GetTableCredentials(req, timeout=5)
    assert info.value.code() == grpc.StatusCode.UNAUTHENTICATED
    with pytest.raises(grpc.aio.AioRpcError) as info:
        await s.creds.GetTableCredentials(
            req, metadata=(("authorization", "Bearer wrong"),), timeout=5)
    assert info.value.code() == grpc.StatusCode.UNAUTHENTICATED
    resp = await s.creds.GetTableCredentials(
        req, metadata=(("authorization", "Bearer tok-alice-123"),), timeout=5)
    assert resp.warehouse_id == WAREHOUSE.id
    assert count(metrics, "grpc", "credential", "denied") == 2
    assert fake_ops.calls["get_credentials"] == 1


async def test_policy_refuses_other_namespace(server_factory, fake_ops: FakeOperations) -> None:
    policy = CallerPolicy(parse_rules(
        {"callers": {"alice": [{"warehouse": "demo", "namespace": "team_a*", "table": "*",
                                "access": ["read"]}]}}, "test"))
    s = await server_factory(auth=StaticTokenCallerAuth({"tok-alice-123": "alice"}),
                             policy=policy)
    md = (("authorization", "Bearer tok-alice-123"),)
    ok = common_pb2.TableRef(warehouse="demo", namespace=["team_a"], name="sales")
    await s.creds.GetTableCredentials(
        credentials_pb2.GetTableCredentialsRequest(table=ok), metadata=md, timeout=5)
    other = common_pb2.TableRef(warehouse="demo", namespace=["team_b"], name="payroll")
    with pytest.raises(grpc.aio.AioRpcError) as info:
        await s.creds.GetTableCredentials(
            credentials_pb2.GetTableCredentialsRequest(table=other), metadata=md, timeout=5)
    assert info.value.code() == grpc.StatusCode.PERMISSION_DENIED
    with pytest.raises(grpc.aio.AioRpcError) as info:
        await s.creds.GetTableCredentials(
            credentials_pb2.GetTableCredentialsRequest(
                table=ok, access=common_pb2.ACCESS_MODE_WRITE), metadata=md, timeout=5)
    assert info.value.code() == grpc.StatusCode.PERMISSION_DENIED
    assert fake_ops.accesses == [AccessMode.READ]


async def test_catalog_round_trip(server_factory, fake_ops: FakeOperations) -> None:
    s = await server_factory()
    t1 = common_pb2.TableRef(warehouse="demo", namespace=["demo_ns"], name="t1")
    created = await s.catalog.CreateTable(
        catalog_pb2.CreateTableRequest(table=t1, format="lance"), timeout=5)
    assert created.table.name == "t1"
    listed = await s.catalog.ListTables(
        catalog_pb2.ListTablesRequest(warehouse="demo", namespace=["demo_ns"]), timeout=5)
    assert {i.name for i in listed.identifiers} == {"orders", "t1"}
    loaded = await s.catalog.LoadTable(catalog_pb2.LoadTableRequest(table=t1, vended=True),
                                       timeout=5)
    assert loaded.credentials
    assert loaded.warehouse_id == WAREHOUSE.id
    await s.catalog.RenameTable(catalog_pb2.RenameTableRequest(
        warehouse="demo", source_namespace=["demo_ns"], source_name="t1",
        destination_namespace=["demo_ns"], destination_name="t2"), timeout=5)
    await s.catalog.DropTable(catalog_pb2.DropTableRequest(
        table=common_pb2.TableRef(warehouse="demo", namespace=["demo_ns"], name="t2")),
        timeout=5)
    wh = await s.catalog.ResolveWarehouse(
        catalog_pb2.ResolveWarehouseRequest(warehouse="demo"), timeout=5)
    assert wh.warehouse_id == WAREHOUSE.id
    inv = await s.creds.InvalidateCredentials(
        credentials_pb2.InvalidateCredentialsRequest(all=True), timeout=5)
    assert inv.invalidated == 3


async def test_invalidate_by_an_unknown_warehouse_name_is_not_found(
    server_factory, fake_ops: FakeOperations
) -> None:
    s = await server_factory()
    with pytest.raises(grpc.aio.AioRpcError) as info:
        await s.creds.InvalidateCredentials(credentials_pb2.InvalidateCredentialsRequest(
            table=common_pb2.TableRef(warehouse="no-such-wh", namespace=["demo_ns"],
                                      name="orders")), timeout=5)
    assert info.value.code() == grpc.StatusCode.NOT_FOUND  # was OK, invalidated=0
    assert fake_ops.calls["invalidate"] == 0


async def test_health_reports_serving_only_when_set(server_factory) -> None:
    s = await server_factory()
    health = health_pb2_grpc.HealthStub(s.channel)
    await s.surface.set_serving(False)
    resp = await health.Check(health_pb2.HealthCheckRequest(service=""), timeout=5)
    assert resp.status == health_pb2.HealthCheckResponse.NOT_SERVING
    await s.surface.set_serving(True)
    resp = await health.Check(
        health_pb2.HealthCheckRequest(service="lakegate.v1.CredentialService"), timeout=5)
    assert resp.status == health_pb2.HealthCheckResponse.SERVING


async def test_reflection_lists_both_services_and_health(server_factory) -> None:
    from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc

    s = await server_factory()
    stub = reflection_pb2_grpc.ServerReflectionStub(s.channel)

    async def requests():
        yield reflection_pb2.ServerReflectionRequest(list_services="")

    names = set()
    async for resp in stub.ServerReflectionInfo(requests(), timeout=5):
        names |= {svc.name for svc in resp.list_services_response.service}
    assert {"lakegate.v1.CredentialService", "lakegate.v1.CatalogService",
            "grpc.health.v1.Health"} <= names


async def test_expected_identity_fields_reach_the_service(
    server_factory, fake_ops: FakeOperations
) -> None:
    s = await server_factory()
    await s.creds.GetTableCredentials(credentials_pb2.GetTableCredentialsRequest(
        table=ORDERS, expected_location="s3://b/wh/t1", table_id="Abc"), timeout=5)
    await s.creds.GetTableCredentials(
        credentials_pb2.GetTableCredentialsRequest(table=ORDERS), timeout=5)
    assert fake_ops.expects == [ExpectedIdentity(location="s3://b/wh/t1", table_id="abc"), None]


async def test_identity_mismatch_maps_to_failed_precondition(
    server_factory, fake_ops: FakeOperations
) -> None:
    fake_ops.errors["get_credentials"] = TableIdentityMismatchError("another table")
    s = await server_factory()
    with pytest.raises(grpc.aio.AioRpcError) as info:
        await s.creds.GetTableCredentials(credentials_pb2.GetTableCredentialsRequest(
            table=ORDERS, expected_location="s3://b/old"), timeout=5)
    assert info.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    detail = common_pb2.ErrorDetail.FromString(
        dict(info.value.trailing_metadata())[ERROR_DETAIL_KEY])
    assert (detail.type, detail.http_status) == ("TableIdentityMismatch", 409)


@pytest.mark.parametrize("outcome", list(Outcome))
@pytest.mark.parametrize("remaining", [3600.25, 0.0, None])
@pytest.mark.parametrize("access", list(AccessMode))
@pytest.mark.parametrize("identity_ttl", [29.5, 0.0, None])
async def test_pre_serialized_credentials_are_the_bytes_the_message_serializes_to(
    fake_ops: FakeOperations, outcome: Outcome, remaining: float | None, access: AccessMode,
    identity_ttl: float | None,
) -> None:
    fake_ops.outcome = outcome
    ref = TableRef("demo", ("demo_ns",), "orders")
    lookup = (await fake_ops.get_credentials(ref, access, RequestContext(request_id="r"))
              )._replace(remaining_s=remaining, identity_ttl_s=identity_ttl)
    head, tail = credentials_pb_parts(lookup)
    wire = RenderedBody(lookup, head, tail).splice(_pb_fields(lookup)) + _pb_identity_ttl(lookup)
    assert wire == credentials_pb(lookup).SerializeToString()
    parsed = credentials_pb2.GetTableCredentialsResponse.FromString(wire)
    assert parsed.remaining_seconds == (remaining or 0.0)
    # Optional: a stated 0 (ask again every time) is told apart from "not stated".
    assert parsed.HasField("identity_ttl_seconds") is (identity_ttl is not None)
    assert parsed.identity_ttl_seconds == (identity_ttl or 0.0)
    assert parsed.access == (common_pb2.ACCESS_MODE_WRITE if access is AccessMode.WRITE
                             else common_pb2.ACCESS_MODE_READ)


async def test_a_rotated_credential_set_is_served_at_once_not_the_old_bytes(
    tmp_path: Path, rotating_ops: RotatingOperations, metrics: Metrics, clock: FakeClock
) -> None:
    surface = GrpcSurface(rotating_ops, build_gate(rotating_ops, metrics, clock),
                          Recorder(metrics, clock), max_message_bytes=64 * 1024)
    surface.bind_uds(str(tmp_path / "rot.sock"))
    await surface.server.start()
    try:
        async with grpc.aio.insecure_channel(f"unix:{tmp_path / 'rot.sock'}") as channel:
            stub = credentials_pb2_grpc.CredentialServiceStub(channel)
            request = credentials_pb2.GetTableCredentialsRequest(table=ORDERS)
            outcomes = iter([Outcome.HIT, Outcome.MISS, Outcome.HIT, Outcome.COALESCED])

            async def key() -> str:
                rotating_ops.outcome = next(outcomes)
                rotating_ops.lifetime_s -= 1.5
                resp = await stub.GetTableCredentials(request, timeout=5)
                # the per-call fields follow each call, the cached part the served set
                assert resp.outcome == _OUTCOMES[rotating_ops.outcome]
                assert resp.remaining_seconds == rotating_ops.lifetime_s
                return str(resp.credentials[0].config["s3.access-key-id"])

            assert await rotating_ops.keys_across_rotation(key) == ROTATED_KEYS
    finally:
        await surface.server.stop(0)


async def test_repeated_tables_reuse_one_validated_ref(server_factory,
                                                       fake_ops: FakeOperations) -> None:
    """The servicer's request memo: the same request bytes give the same checked TableRef;
    the kind is part of them ("" and "generic" are two spellings of one ref); a refused name
    is refused on every call (never remembered)."""
    s = await server_factory()
    for kind in ("", "generic", "generic", "iceberg", "iceberg"):
        await s.creds.GetTableCredentials(
            credentials_pb2.GetTableCredentialsRequest(table=ORDERS, kind=kind), timeout=5)
    unnamed, generic, generic_again, iceberg, iceberg_again = fake_ops.refs
    assert generic is generic_again
    assert unnamed == generic
    assert generic.kind == "generic"
    assert iceberg is iceberg_again
    assert iceberg.kind == "iceberg"
    assert iceberg.scope == generic.scope
    bad = common_pb2.TableRef(warehouse="demo", namespace=["demo_ns"], name="..")
    for _ in range(2):
        with pytest.raises(grpc.aio.AioRpcError) as info:
            await s.creds.GetTableCredentials(
                credentials_pb2.GetTableCredentialsRequest(table=bad), timeout=5)
        assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert fake_ops.calls["get_credentials"] == 5


async def test_resolve_warehouse_applies_the_caller_policy(server_factory) -> None:
    """Issue #35 item 6: ResolveWarehouse told any caller any warehouse's id."""
    policy = CallerPolicy(parse_rules(
        {"callers": {"alice": [{"warehouse": "other", "namespace": "*", "table": "*"}],
                     "bob": [{"warehouse": "demo", "namespace": "x", "table": "y"}]}}, "test"))
    s = await server_factory(auth=StaticTokenCallerAuth({"tok-alice-123": "alice",
                                                         "tok-bob-12345": "bob"}),
                             policy=policy)
    for given in ("demo", WAREHOUSE.id):
        with pytest.raises(grpc.aio.AioRpcError) as info:
            await s.catalog.ResolveWarehouse(
                catalog_pb2.ResolveWarehouseRequest(warehouse=given),
                metadata=(("authorization", "Bearer tok-alice-123"),), timeout=5)
        assert info.value.code() == grpc.StatusCode.PERMISSION_DENIED
        wh = await s.catalog.ResolveWarehouse(
            catalog_pb2.ResolveWarehouseRequest(warehouse=given),
            metadata=(("authorization", "Bearer tok-bob-12345"),), timeout=5)
        assert wh.warehouse_id == WAREHOUSE.id
