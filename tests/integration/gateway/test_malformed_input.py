"""Malformed input on every surface of the real daemon → a clear 4xx / INVALID_ARGUMENT."""

from __future__ import annotations

import grpc
import httpx
import pytest

from devstack.stack_info import StackInfo
from lakegate.v1 import common_pb2, credentials_pb2, credentials_pb2_grpc

pytestmark = pytest.mark.integration

NS = "demo_ns"
HUGE = b"{" + b" " * (2 << 20) + b"}"


@pytest.mark.parametrize(
    ("method", "path", "body", "status"),
    [
        ("GET", "/v1/warehouses/demo/namespaces/%00x/tables/t/credentials", None, 400),
        ("GET", "/v1/warehouses/demo/namespaces/demo_ns/tables/%FF/credentials", None, 400),
        ("GET", "/v1/warehouses/demo/namespaces/demo_ns/tables/t/credentials?access=x", None, 400),
        ("GET", "/v1/warehouses/no_such_wh/namespaces/demo_ns/tables/t/credentials", None, 404),
        ("POST", "/v1/warehouses/demo/namespaces/demo_ns/tables", b"{bad json", 400),
        ("POST", "/v1/warehouses/demo/namespaces/demo_ns/tables", HUGE, 413),
        ("POST", "/v1/cache/invalidate", b'{"namespace": "notalist"}', 400),
        ("GET", "/v1/aws-credentials/demo/%00/t", None, 400),
        ("GET", "/v1/aws-credentials/no_such_wh/demo_ns/t", None, 404),
        ("POST", "/lakekeeper/v1/demo/namespaces/demo_ns/generic-tables", b"[]", 400),
        ("POST", "/lakekeeper/v1/demo/namespaces/demo_ns/generic-tables", HUGE, 413),
        ("GET", "/lakekeeper/v1/demo/namespaces/demo_ns/generic-tables?pageSize=abc", None, 400),
        ("GET", "/lakekeeper/v1/no_such_wh/namespaces/demo_ns/generic-tables/t", None, 404),
        ("GET", "/lakekeeper/v1/demo/namespaces/demo_ns/generic-tables/missing", None, 404),
        ("POST", "/lakekeeper/v1/demo/generic-tables/rename", b'{"source": 1}', 400),
        ("GET", "/management/v1/users", None, 404),
        ("GET", "/catalog/v1/config", None, 400),
    ],
)
def test_http_surfaces_answer_4xx_with_an_envelope(
    info: StackInfo, method: str, path: str, body: bytes | None, status: int
) -> None:
    with httpx.Client(base_url=info.gateway_url, trust_env=False, timeout=30) as c:
        resp = c.request(method, path, content=body, headers={
            "Authorization": "Bearer x", "Content-Type": "application/json"})
    assert resp.status_code == status, resp.text
    err = resp.json()["error"]
    assert err["code"] == status
    assert err["stack"][0].startswith("Error ID: ")


BODY_ROUTES = [
    "/lakekeeper/v1/demo/namespaces/demo_ns/generic-tables",
    "/lakekeeper/v1/demo/generic-tables/rename",
    "/v1/warehouses/demo/namespaces/demo_ns/tables",
    "/v1/warehouses/demo/tables/rename",
    "/v1/cache/invalidate",
]


@pytest.mark.parametrize("path", BODY_ROUTES)
@pytest.mark.parametrize(
    ("body", "message"),
    [(b"[" * 100_000, "nested deeper"), (b'{"a":' * 50_000, "nested deeper"),
     (b'{"name": NaN}', "not JSON"), (b'{"name": 1e999}', "out of range"),
     (b'{"name": "a", "name": "b"}', "duplicate keys"), (b'{"name": "\xff"}', "UTF-8"),
     (b'"just a string"', "JSON object")],
    ids=["100k-[", "50k-{a:", "nan", "1e999", "duplicate-keys", "invalid-utf8", "not-object"],
)
def test_hostile_json_bodies_are_400_on_every_body_route(
    info: StackInfo, path: str, body: bytes, message: str
) -> None:
    with httpx.Client(base_url=info.gateway_url, trust_env=False, timeout=30) as c:
        resp = c.post(path, content=body, headers={"Authorization": "Bearer x",
                                                   "Content-Type": "application/json"})
        assert resp.status_code == 400, resp.text
        err = resp.json()["error"]
        assert (err["code"], err["type"]) == (400, "BadRequest")
        assert message in err["message"]
        assert c.get("/livez").status_code == 200  # and the daemon is still serving


@pytest.mark.parametrize(
    ("table", "code"),
    [
        (common_pb2.TableRef(warehouse="", namespace=[NS], name="t"),
         grpc.StatusCode.INVALID_ARGUMENT),
        (common_pb2.TableRef(warehouse="demo", namespace=[], name="t"),
         grpc.StatusCode.INVALID_ARGUMENT),
        (common_pb2.TableRef(warehouse="no_such_wh", namespace=[NS], name="t"),
         grpc.StatusCode.NOT_FOUND),
        (common_pb2.TableRef(warehouse="demo", namespace=[NS], name="missing"),
         grpc.StatusCode.NOT_FOUND),
    ],
)
def test_grpc_bad_fields(info: StackInfo, table, code) -> None:
    with grpc.insecure_channel(info.gateway.grpc_target) as channel:
        stub = credentials_pb2_grpc.CredentialServiceStub(channel)
        with pytest.raises(grpc.RpcError) as err:
            stub.GetTableCredentials(credentials_pb2.GetTableCredentialsRequest(table=table),
                                     timeout=30)
    assert err.value.code() == code


def test_grpc_bad_protobuf_bytes_and_oversized_messages(info: StackInfo) -> None:
    with grpc.insecure_channel(f"unix:{info.gateway.grpc_uds}") as channel:
        raw = channel.unary_unary("/lakegate.v1.CredentialService/GetTableCredentials",
                                  request_serializer=lambda b: b,
                                  response_deserializer=lambda b: b)
        with pytest.raises(grpc.RpcError) as err:
            raw(b"\x0a\xff\xff\xff\xff\x0f", timeout=30)
        assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        with pytest.raises(grpc.RpcError) as err:
            raw(b"\x0a" + b"\x00" * (2 << 20), timeout=30)
        assert err.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED


def test_ops_endpoints(info: StackInfo) -> None:
    with httpx.Client(base_url=info.gateway_url, trust_env=False, timeout=30) as c:
        assert c.get("/livez").status_code == 200
        assert c.get("/readyz").json()["status"] == "ready"
        text = c.get("/metrics").text
        for name in ("lakegate_requests_total", "lakegate_upstream_requests_total",
                     "lakegate_cache_entries", "lakegate_served_remaining_seconds",
                     "lakegate_idp_token_expiry_timestamp_seconds"):
            assert name in text
        spec = c.get("/v1/openapi.json").json()
        assert spec["openapi"].startswith("3.1")
