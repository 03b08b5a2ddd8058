"""Forwarded routes: the object the policy decided on is the object the catalog receives.

Issue #35 finding 1: the forwarded path was the raw request path, so a `#` in a table name
(`orders#_public`) was decided on as `orders#_public` and reached the catalog, through the URL
library, as `orders`. Here the gateway runs in process with the real upstream client (yarl +
aiohttp, `CatalogClient.forward`) in front of a fake catalog that records the raw URL it
received and decodes it as Lakekeeper (axum) does: split on `/`, percent-decode each segment,
split the namespace on U+001F, `+` read as a space in namespace levels and Iceberg table names.
Requests are sent as raw bytes so that a `#`, `%2E%2E` or `%2F` reaches the gateway exactly as
a hostile client spells it.
"""

from __future__ import annotations

import asyncio
import json
import socket
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs, quote, unquote

import pytest
from aiohttp import web
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gateway.clock import SystemClock
from gateway.metrics import Metrics
from gateway.models import (
    AccessMode,
    CallerIdentity,
    RequestContext,
    Scope,
    UpstreamResponse,
)
from gateway.names import NAMESPACE_SEPARATOR
from gateway.surfaces.accounting import Recorder
from gateway.surfaces.callers import NoCallerAuth
from gateway.surfaces.http_app import HttpDeps, build_http_app
from gateway.surfaces.ingress import Gate
from gateway.surfaces.policy import CallerPolicy
from gateway.upstream.lakekeeper import CatalogClient
from gateway.upstream.transport import AiohttpTransport
from tests.fakes.settings import make_settings
from tests.fakes.tokens import FakeTokenSource
from tests.unit.surfaces.fake_operations import WAREHOUSE, FakeOperations

ICEBERG_TABLE = ("catalog", "v1", "{wh}", "namespaces", "{ns}", "tables", "{table}")
GENERIC_TABLE = ("lakekeeper", "v1", "{wh}", "namespaces", "{ns}", "generic-tables", "{table}")
CLIENT_MANAGED = {"X-Iceberg-Access-Delegation": "client-managed"}
VENDED = {"X-Iceberg-Access-Delegation": "vended-credentials"}
METADATA = {"metadata-location": "s3://warehouse/x/metadata/1.json",
            "metadata": {"format-version": 2, "location": "s3://warehouse/x"}, "config": {}}


@dataclass(frozen=True)
class Forwarded:
    """A forwarded route: method, pattern, delegation headers, and how to build its body."""

    name: str
    method: str
    pattern: tuple[str, ...]
    headers: dict[str, str] = field(default_factory=dict)
    body: str | None = None  # "create", "commit", "rename", "namespace"

    @property
    def iceberg(self) -> bool:
        return self.pattern[0] == "catalog"


ROUTES = (
    Forwarded("iceberg list", "GET", ICEBERG_TABLE[:-1]),
    Forwarded("iceberg create", "POST", ICEBERG_TABLE[:-1], body="create"),
    Forwarded("iceberg exists", "HEAD", ICEBERG_TABLE),
    Forwarded("iceberg load client-managed", "GET", ICEBERG_TABLE, CLIENT_MANAGED),
    Forwarded("iceberg load vended", "GET", ICEBERG_TABLE, VENDED),
    Forwarded("iceberg commit", "POST", ICEBERG_TABLE, body="commit"),
    Forwarded("iceberg drop", "DELETE", ICEBERG_TABLE),
    Forwarded("iceberg rename", "POST", ("catalog", "v1", "{wh}", "tables", "rename"),
              body="rename"),
    Forwarded("generic load client-managed", "GET", GENERIC_TABLE, CLIENT_MANAGED),
    Forwarded("namespace get", "GET", ICEBERG_TABLE[:5]),
    Forwarded("namespace list", "GET", ICEBERG_TABLE[:4]),
    Forwarded("namespace create", "POST", ICEBERG_TABLE[:4], body="namespace"),
)


# ---- what a hostile client sends -----------------------------------------------------------

# Characters a URL, the URL library or Lakekeeper give a meaning to, and plain ones.
ALPHABET = ["a", "b", "Z", "0", "_", "-", "#", "?", "%", "/", ".", "+", " ", ";", "~", "&",
            "=", "\\", "ü", "ẞ", "\x1f", "\uff03"]
# How one character may be spelt in a raw path: as is, or percent-encoded (upper or lower hex).
SPELLINGS = st.sampled_from(["raw", "upper", "lower"])
# Sequences that normalise away or cut a path in a URL library.
TRICKS = ["%2E%2E", "%2e", "..", ".", "%2F", "%23", "%3F", "#", "?", "%00", "%1F", "%25",
          "%zz", "_public", "#_public", "%23_public"]


def spell(char: str, how: str) -> str:
    """One character in a raw request target: raw only where a request line may carry it."""
    if how == "raw" and 0x21 <= ord(char) <= 0x7E:
        return char
    encoded = quote(char, safe="")
    if encoded == char:  # unreserved: encode by hand
        encoded = "".join(f"%{b:02X}" for b in char.encode())
    return encoded if how != "lower" else encoded.lower()


# Characters a valid name may hold, some of which a URL library treats specially when raw.
NAME_CHARS = ["a", "b", "Z", "0", "_", "-", "+", " ", ";", "~", "&", "=", "\\", "ü", "ẞ",
              "/", "%", "!", "'", "(", "*", "@", ":", ","]


@st.composite
def valid_segment(draw: st.DrawFn) -> str:
    """A raw segment of a valid name, spelt raw or percent-encoded character by character
    (`/` and `%` always encoded: raw they would split the path or start an escape)."""
    chars = draw(st.lists(st.tuples(st.sampled_from(NAME_CHARS), SPELLINGS),
                          min_size=1, max_size=8))
    return "".join(spell(c, "upper" if c in "/%" and how == "raw" else how)
                   for c, how in chars)


@st.composite
def hostile_segment(draw: st.DrawFn) -> str:
    """A raw segment mixing hostile characters and tricks with plain names."""
    parts = draw(st.lists(st.one_of(
        st.tuples(st.sampled_from(ALPHABET), SPELLINGS).map(lambda p: spell(*p)),
        st.sampled_from(TRICKS),
        st.sampled_from(["orders", "team_a", "x"]),
    ), min_size=1, max_size=5))
    return "".join(parts)


def raw_segment() -> st.SearchStrategy[str]:
    """Two in three segments name a valid object (so most requests are forwarded), one in
    three is hostile."""
    return st.one_of(valid_segment(), valid_segment(), hostile_segment())


@st.composite
def raw_namespace(draw: st.DrawFn) -> str:
    levels = draw(st.lists(raw_segment(), min_size=1, max_size=3))
    sep = draw(st.sampled_from(["%1F", "%1f"]))
    return sep.join(levels)


def body_name(draw: st.DrawFn) -> str:
    """A name as a JSON body carries it (decoded)."""
    return unquote(draw(raw_segment()))


# ---- the catalog as Lakekeeper decodes what it receives --------------------------------------


def lakekeeper_decode(pattern: tuple[str, ...], raw_path: str) -> dict[str, Any] | None:
    """The objects a Lakekeeper-like catalog reads from a received raw path, or None when the
    path does not have the route's shape (another endpoint)."""
    segments = raw_path.strip("/").split("/")
    if len(segments) != len(pattern):
        return None
    out: dict[str, Any] = {}
    for pat, seg in zip(pattern, segments, strict=True):
        value = unquote(seg, errors="strict")
        if pat == "{wh}":
            out["warehouse"] = value
        elif pat == "{ns}":
            out["namespace"] = tuple(level.replace("+", " ")
                                     for level in value.split(NAMESPACE_SEPARATOR))
        elif pat == "{table}":
            out["table"] = value.replace("+", " ") if pattern[0] == "catalog" else value
        elif pat != value:
            return None
    return out


def as_lakekeeper_reads(pattern: tuple[str, ...], scope: Scope) -> dict[str, Any]:
    """What the catalog must read for a decided scope (Lakekeeper's `+` rule applied)."""
    _, namespace, table = scope
    out: dict[str, Any] = {"warehouse": WAREHOUSE.id}
    if "{ns}" in pattern:
        out["namespace"] = tuple(level.replace("+", " ") for level in namespace)
    if "{table}" in pattern and table is not None:
        out["table"] = table.replace("+", " ") if pattern[0] == "catalog" else table
    return out


# ---- the running gateway and catalog -------------------------------------------------------


class RecordingGate(Gate):
    """The real gate, recording every scope the policy decided on."""

    decided: list[tuple[Scope, AccessMode]]

    async def authorize(self, caller: CallerIdentity, ctx: RequestContext, scope: Scope,
                        access: AccessMode) -> None:
        self.decided.append((scope, access))
        await super().authorize(caller, ctx, scope, access)


@dataclass
class UpstreamOps(FakeOperations):
    """FakeOperations whose forwards go through the real upstream client."""

    client: CatalogClient | None = None

    async def forward(self, method: str, path: str, query: str, body: bytes | None,
                      ctx: RequestContext, headers: Any = None) -> UpstreamResponse:
        assert self.client is not None
        self.forwarded.append((method, path, query))
        return await self.client.forward(method, path, query, body, ctx, headers=headers)


class Stack:
    """The gateway app and a recording fake catalog on one event loop in a thread."""

    def __init__(self) -> None:
        self.received: list[tuple[str, str, bytes]] = []
        self.loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self.port = 0
        self.gate: RecordingGate | None = None

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.run_until_complete(self._start())
        self._ready.set()
        self.loop.run_forever()

    async def _catalog(self, request: web.BaseRequest) -> web.StreamResponse:
        body = await request.read()
        self.received.append((request.method, request.raw_path, body))
        return web.json_response(METADATA)

    async def _start(self) -> None:
        catalog = web.Server(self._catalog)
        self._catalog_runner = web.ServerRunner(catalog)
        await self._catalog_runner.setup()
        site = web.TCPSite(self._catalog_runner, "127.0.0.1", 0)
        await site.start()
        catalog_port = self._catalog_runner.addresses[0][1]
        clock, metrics = SystemClock(), Metrics()
        settings_ = make_settings(UPSTREAM__URL=f"http://127.0.0.1:{catalog_port}",
                                  UPSTREAM__MAX_RETRIES="0")
        self.transport = AiohttpTransport()
        client = CatalogClient(self.transport, FakeTokenSource(), settings_.upstream, metrics,
                               clock)
        ops = UpstreamOps(client=client)
        ops.add_table(("a",), "x")
        gate = RecordingGate(NoCallerAuth(), CallerPolicy(None), None, ops, metrics)
        gate.decided = []
        self.gate = gate
        deps = HttpDeps(ops, gate, Recorder(metrics, clock), metrics, clock, 1 << 20, 1000)
        self._runner = web.AppRunner(build_http_app(deps))
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self.port = self._runner.addresses[0][1]

    def start(self) -> None:
        self._thread.start()
        assert self._ready.wait(30), "the in-process gateway did not start"

    def stop(self) -> None:
        async def _stop() -> None:
            await self._runner.cleanup()
            await self.transport.close()
            await self._catalog_runner.cleanup()
        asyncio.run_coroutine_threadsafe(_stop(), self.loop).result(30)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(30)

    def send(self, method: str, target: str, headers: dict[str, str],
             body: bytes | None) -> int:
        """One raw HTTP/1.1 request (the target exactly as given); the answer's status."""
        lines = [f"{method} {target} HTTP/1.1", "Host: localhost",
                 "Authorization: Bearer engine", "Connection: close",
                 *(f"{k}: {v}" for k, v in headers.items())]
        if body is not None:
            lines += ["Content-Type: application/json", f"Content-Length: {len(body)}"]
        payload = ("\r\n".join(lines) + "\r\n\r\n").encode() + (body or b"")
        with socket.create_connection(("127.0.0.1", self.port), timeout=10) as sock:
            sock.sendall(payload)
            data = b""
            while b"\r\n" not in data:
                chunk = sock.recv(4096)
                if not chunk:
                    break
                data += chunk
        return int(data.split(b" ", 2)[1])


def routed(sent: Forwarded, target: str) -> Forwarded:
    """The route a raw target names: the path before the first `?` decides (HEAD is served by
    the GET route where there is no HEAD one)."""
    segments = target.partition("?")[0].strip("/").split("/")
    for route in ROUTES:
        methods = {sent.method, "GET"} if sent.method == "HEAD" else {sent.method}
        if route.method in methods and len(route.pattern) == len(segments) and all(
                p.startswith("{") or p == s for p, s in zip(route.pattern, segments, strict=True)):
            return route if route.body == sent.body else sent
    raise AssertionError(f"{target!r} was forwarded but names no forwarded route")


@pytest.fixture(scope="module")
def stack() -> Iterator[Stack]:
    s = Stack()
    s.start()
    yield s
    s.stop()


def _body(route: Forwarded, draw: st.DrawFn) -> tuple[bytes | None, dict[str, Any]]:
    if route.body == "create":
        name = body_name(draw)
        return json.dumps({"name": name, "schema": {}}).encode(), {"table": name}
    if route.body == "commit":
        return b'{"requirements": [], "updates": []}', {}
    if route.body == "rename":
        src = {"namespace": [body_name(draw)], "name": body_name(draw)}
        dst = {"namespace": [body_name(draw)], "name": body_name(draw)}
        return json.dumps({"source": src, "destination": dst}).encode(), {}
    if route.body == "namespace":
        return json.dumps({"namespace": [body_name(draw)]}).encode(), {}
    return None, {}


@settings(max_examples=400, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(data=st.data())
def test_the_catalog_receives_the_object_the_policy_decided_on(stack: Stack,
                                                              data: st.DataObject) -> None:
    route = data.draw(st.sampled_from(ROUTES), label="route")
    parts = []
    for pat in route.pattern:
        if pat == "{wh}":
            parts.append(data.draw(st.sampled_from(["demo", "DEMO", "dem%6F", WAREHOUSE.id])))
        elif pat == "{ns}":
            parts.append(data.draw(raw_namespace(), label="namespace"))
        elif pat == "{table}":
            parts.append(data.draw(raw_segment(), label="table"))
        else:
            parts.append(pat)
    target = "/" + "/".join(parts)
    if (route.pattern[-1] == "namespaces" and route.method == "GET"
            and data.draw(st.booleans(), label="parent")):
        target += "?parent=" + data.draw(raw_namespace(), label="parent")
    body, _ = _body(route, data.draw)
    assert stack.gate is not None
    stack.gate.decided.clear()
    stack.received.clear()
    status = stack.send(route.method, target, route.headers, body)

    assert len(stack.received) <= 1, "one request, at most one catalog call"
    if not stack.received:
        return
    method, raw_path, sent_body = stack.received[0]
    assert status < 500, (route.name, target, status)
    assert method == route.method, (route.name, target, method)
    # A raw `?` starts the query wherever it is: the request names the route its path has.
    route = routed(route, target)
    got = lakekeeper_decode(route.pattern, raw_path.partition("?")[0])
    assert got is not None, f"{route.name}: {target!r} reached another endpoint: {raw_path!r}"
    decided = [scope for scope, _ in stack.gate.decided]
    if "{ns}" in route.pattern:  # a path object: the catalog's is one the policy decided on
        assert any(as_lakekeeper_reads(route.pattern, scope) == got for scope in decided), (
            route.name, target, raw_path, decided)
    else:
        assert got == {"warehouse": WAREHOUSE.id}
    parents = parse_qs(raw_path.partition("?")[2]).get("parent")
    if route.name == "namespace list" and parents is not None:  # that namespace was decided on
        assert len(parents) == 1, (target, raw_path)
        levels = tuple(p.replace("+", " ") for p in parents[0].split(NAMESPACE_SEPARATOR))
        assert any(tuple(p.replace("+", " ") for p in s[1]) == levels for s in decided), (
            target, raw_path, decided)
    if route.body in {"rename", "namespace", "create"}:  # body objects were decided on too
        doc = json.loads(sent_body)
        if route.body == "rename":
            for side in ("source", "destination"):
                ident = doc[side]
                assert any(s[1] == tuple(ident["namespace"]) and s[2] == ident["name"]
                           for s in decided), (route.name, doc, decided)
        elif route.body == "namespace":
            assert any(s[1] == tuple(doc["namespace"]) for s in decided), (doc, decided)
        else:
            assert any(s[2] == doc["name"] for s in decided), (doc, decided)


@pytest.mark.parametrize("route", [r for r in ROUTES if "{table}" in r.pattern],
                         ids=lambda r: r.name)
@pytest.mark.parametrize("table", ["orders#_public", "orders%23_public", "orders%3F_public",
                                   "%2E%2E", "orders%EF%BC%83_public"])
def test_a_url_delimiter_in_a_name_is_refused_with_400_and_never_forwarded(
    stack: Stack, route: Forwarded, table: str
) -> None:
    """The issue's case: `orders#_public` must not be decided on as itself and reach the
    catalog as `orders` (a drop of `orders` under a rule allowing `*_public`)."""
    parts = [{"{wh}": "demo", "{ns}": "shared", "{table}": table}.get(p, p)
             for p in route.pattern]
    body = b'{"requirements": [], "updates": []}' if route.body == "commit" else None
    stack.received.clear()
    status = stack.send(route.method, "/" + "/".join(parts), route.headers, body)
    assert status == 400, (route.name, table, status)
    assert stack.received == []


def test_a_namespace_with_a_hash_is_not_forwarded_as_a_namespace_drop(stack: Stack) -> None:
    """`DELETE .../namespaces/team_b#/tables/x` must not reach the catalog as a namespace drop."""
    stack.received.clear()
    status = stack.send("DELETE", "/catalog/v1/demo/namespaces/team_b#/tables/x", {}, None)
    assert status == 400
    assert stack.received == []


def test_the_forwarded_path_is_rebuilt_with_each_segment_encoded_again(stack: Stack) -> None:
    """A name the caller spelt partly encoded reaches the catalog fully encoded: `%1F` between
    levels, `%2F` inside a name, `~` and `;` as the catalog decodes them."""
    stack.received.clear()
    status = stack.send("DELETE", "/catalog/v1/DEMO/namespaces/a%1fb%20c/tables/t%2Fu;v%7E",
                        {}, None)
    assert status == 200
    assert [(m, p) for m, p, _ in stack.received] == [
        ("DELETE", f"/catalog/v1/{WAREHOUSE.id}/namespaces/a%1Fb%20c/tables/t%2Fu;v~")]
