"""Structurally hostile input on EVERY registered HTTP route and gRPC method: never a 5xx.

Routes and methods are enumerated from the app's own tables (the router, grpc_servicers.SERVICES),
so a route or method added later is walked automatically. The fake service behind them answers
like the real one, so any 5xx here is a surface bug (an exception escaping a handler).
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import grpc
import pytest
from aiohttp.test_utils import TestClient
from google.protobuf.descriptor import FieldDescriptor
from google.protobuf.message import Message

from gateway.surfaces.grpc_servicers import SERVICES
from gateway.surfaces.http_app import ROUTER_KEY
from gateway.surfaces.http_routing import AnyRoute, OpenRoute
from tests.unit.surfaces.conftest import MakeClient

MARK = {"X-Lakegate-Request": "1"}
VALID = {"wh": "demo", "ns": "demo_ns", "table": "orders"}
HOSTILE_SEGMENTS = ["%FF", "%C3", "%00", "..", "%2E%2E", "a%2Fb", "x" * 300, "%", "a%1F%1Fb",
                    "%1F".join(["l"] * 20), "a.b", "%7F", "%E2%80%AE"]
HOSTILE_QUERIES = [
    "access=%FF", "access=admin", "pageSize=-1", "pageSize=0", "page_size=1" + "0" * 30,
    "pageSize=abc", "pageToken=%FF%FE%00", "page_token=" + "t" * 4000, "purge=maybe",
    "purgeRequested=%00", "force=2", "vended=yes", "warehouse=%FF", "warehouse=..",
    "warehouse=a%2Fb", "warehouse=", "%FF=%FF", "access=read&access=write",
]
DEEP_LIST = b"[" * 100_000
DEEP_OBJECT = b'{"a":' * 50_000
FIELDS = ["name", "format", "base_location", "base-location", "doc", "properties", "namespace",
          "source", "destination", "warehouse", "table", "all", "schema"]
WRONG_TYPES = [None, 1, 1.5, True, [], {}, ["x"], {"a": 1}, "x" * 10_000, [["a"]]]


def hostile_bodies() -> Iterator[bytes]:
    yield DEEP_LIST
    yield DEEP_OBJECT
    yield b'{"a":' + b"[" * 70 + b"]" * 70 + b"}"
    yield b'{"a":[' + b"0," * 150_000 + b"0]}"
    yield from (b"", b"[]", b"null", b"1", b'"s"', b"{", b'{"a":NaN}', b'{"a":Infinity}',
                b'{"a":1e999}', b'{"a":' + b"9" * 5000 + b"}", b'{"a":1,"a":2}',
                b'{"name":"\xff"}', b'{"name":"\\ud800"}', '{"a":1}'.encode("utf-16"),
                b"\xef\xbb\xbf{}")
    for field in FIELDS:
        for value in WRONG_TYPES:
            yield json.dumps({field: value}).encode()
    for part in ("source", "destination"):
        for value in WRONG_TYPES:
            yield json.dumps({part: {"namespace": value, "name": value}}).encode()


def target(route: AnyRoute, values: dict[str, str]) -> str:
    segments = [values.get(p[1:-1], "x") if p.startswith("{") else p for p in route.pattern]
    return "/" + "/".join(segments)


def hostile_targets(route: AnyRoute) -> Iterator[str]:
    yield target(route, VALID)
    for capture in [p[1:-1] for p in route.pattern if p.startswith("{")]:
        for bad in HOSTILE_SEGMENTS:
            yield target(route, {**VALID, capture: bad})
    for query in HOSTILE_QUERIES:
        yield target(route, VALID) + "?" + query


def assert_handled(route: AnyRoute, method: str, path: str, status: int, body: bytes) -> None:
    assert status < 500, f"{method} {path[:200]} -> {status}: {body[:200]!r}"
    if 400 <= status and method != "HEAD":
        error = json.loads(body)["error"]  # the Lakekeeper envelope, never a traceback
        assert error["code"] == status
        assert "Traceback" not in body.decode("utf-8", "replace")


async def walk(client: TestClient) -> int:
    routes = client.server.app[ROUTER_KEY].routes()
    sent = 0
    for route in routes:
        methods = [route.method, "HEAD"] if route.method == "GET" else [route.method]
        for method in methods:
            for path in hostile_targets(route):
                resp = await client.request(method, path, headers=MARK,
                                            skip_auto_headers={"Content-Type"})
                assert_handled(route, method, path, resp.status, await resp.read())
                sent += 1
            if method in ("POST", "PUT", "DELETE") and not isinstance(route, OpenRoute):
                for body in hostile_bodies():
                    path = target(route, VALID)
                    resp = await client.request(method, path, data=body,
                                                headers={**MARK,
                                                         "Content-Type": "application/json"})
                    assert_handled(route, method, path, resp.status, await resp.read())
                    sent += 1
    return sent


async def test_every_http_route_answers_hostile_input_with_a_4xx_envelope(
    make_client: MakeClient,
) -> None:
    client = await make_client(max_body_bytes=1 << 20)
    routes = client.server.app[ROUTER_KEY].routes()
    assert len(routes) >= 20  # the walk sees the whole table, not an empty router
    assert await walk(client) > 1000


@pytest.mark.parametrize(
    "path",
    ["/lakekeeper/v1/demo/namespaces/demo_ns/generic-tables",
     "/lakekeeper/v1/demo/generic-tables/rename",
     "/v1/warehouses/demo/namespaces/demo_ns/tables",
     "/v1/warehouses/demo/tables/rename",
     "/v1/cache/invalidate"],
)
@pytest.mark.parametrize("body", [DEEP_LIST, DEEP_OBJECT], ids=["100k-[", "50k-{a:"])
async def test_deeply_nested_bodies_are_400_not_500(
    make_client: MakeClient, path: str, body: bytes
) -> None:
    client = await make_client()
    resp = await client.post(path, data=body, headers={**MARK,
                                                       "Content-Type": "application/json"})
    assert resp.status == 400
    error = (await resp.json())["error"]
    assert (error["code"], error["type"]) == (400, "BadRequest")
    assert "nested deeper" in error["message"]


async def test_an_oversized_body_is_413_on_every_body_route(make_client: MakeClient) -> None:
    client = await make_client(max_body_bytes=4096)
    for route in client.server.app[ROUTER_KEY].routes():
        if route.method != "POST":
            continue
        resp = await client.post(target(route, VALID), data=b'{"a":"' + b"x" * 8192 + b'"}',
                                 headers=MARK)
        assert resp.status == 413, route
        assert (await resp.json())["error"]["type"] == "PayloadTooLarge"


# ---------------------------------------------------------------- gRPC
HOSTILE_STRINGS = ["", "..", "a\x00b", "x" * 300, "a/b", "a.b", "\x1f", "\u202e", "\ud7ff"]
MALFORMED = [b"\xff\xff\xff\xff\x0f garbage", b"\x0a\xff\xff\xff\xff\x0f", b"\x0a\x05ab",
             b"\x08" + b"\xff" * 11, b"\x0a" + b"\x00" * 1000, b"\x12\x02\x0a"]


def hostile_messages(message_type: type[Message]) -> Iterator[Message]:
    """The empty message, then one message per (field, hostile value), nested ones included."""
    yield message_type()
    for field in message_type.DESCRIPTOR.fields:
        for value in hostile_values(field):
            msg = message_type()
            set_field(msg, field, value)
            yield msg


def is_map(field: FieldDescriptor) -> bool:
    return field.message_type is not None and field.message_type.GetOptions().map_entry


def hostile_values(field: FieldDescriptor) -> list[object]:
    if is_map(field):
        return [{"": ""}, {"k\x00": "v"}, {"x" * 300: "y" * 10_000}]
    if field.type == FieldDescriptor.TYPE_MESSAGE:
        return list(hostile_messages(field.message_type._concrete_class))
    if field.type == FieldDescriptor.TYPE_STRING:
        return ([[s] for s in HOSTILE_STRINGS] + [["l"] * 20, ["ok", ""]]
                if field.is_repeated else HOSTILE_STRINGS)
    if field.type == FieldDescriptor.TYPE_BOOL:
        return [True]
    if field.type == FieldDescriptor.TYPE_ENUM:
        return [99, -1]
    if field.type in (FieldDescriptor.TYPE_INT32, FieldDescriptor.TYPE_INT64):
        return [-1, 2**31 - 1]
    return []


def set_field(msg: Message, field: FieldDescriptor, value: object) -> None:
    if is_map(field):
        getattr(msg, field.name).update(value)
    elif field.is_repeated:
        getattr(msg, field.name).extend(value)
    elif field.type == FieldDescriptor.TYPE_MESSAGE:
        getattr(msg, field.name).CopyFrom(value)
    else:
        setattr(msg, field.name, value)


async def call_code(raw: grpc.aio.UnaryUnaryMultiCallable, payload: bytes) -> grpc.StatusCode:
    try:
        await raw(payload, timeout=5, metadata=(("x-request-id", "r" * 4000),))
    except grpc.aio.AioRpcError as err:
        return err.code()
    return grpc.StatusCode.OK


async def test_every_grpc_method_answers_hostile_input_without_internal(server_factory) -> None:
    server = await server_factory()
    calls = 0
    for service, methods in SERVICES.items():
        for name, (request_type, _, _) in methods.items():
            raw = server.channel.unary_unary(f"/{service}/{name}",
                                             request_serializer=lambda b: b,
                                             response_deserializer=lambda b: b)
            payloads = [*MALFORMED, *(m.SerializeToString()
                                      for m in hostile_messages(request_type))]
            for payload in payloads:
                code = await call_code(raw, payload)
                assert code not in (grpc.StatusCode.INTERNAL, grpc.StatusCode.UNKNOWN), (
                    name, payload[:80])
                calls += 1
    assert len(SERVICES) == 2
    assert calls > 100
