"""FakeCatalog: an in-memory Lakekeeper (and IdP) behind the Transport interface.

Real behaviour, no mocks: warehouses, generic tables, vended credentials whose expiry follows
the FakeClock, error envelopes, call counters per operation, and scripted faults (status,
Retry-After, latency gates, connection drops).
"""

from __future__ import annotations

import asyncio
import itertools
import json
import uuid
from collections import Counter, deque
from collections.abc import Mapping
from dataclasses import dataclass, field
from email.utils import formatdate
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

import jwt

from gateway.errors import UnavailableError, UpstreamTimeoutError
from gateway.upstream.transport import RawRequest, RawResponse
from tests.fakes.clock import FakeClock

CATALOG_URL = "http://catalog.test"
TOKEN_URL = "http://idp.test/token"  # noqa: S105 - a URL


@dataclass
class Fault:
    """One scripted answer: an HTTP status (with envelope), or a dropped connection."""

    status: int = 503
    retry_after: str | None = None
    error_type: str = "ServiceUnavailable"
    drop: bool = False
    timeout: bool = False


@dataclass
class FakeTable:
    name: str
    format: str
    base_location: str
    id: str = field(default_factory=lambda: str(uuid.uuid4()))
    doc: str | None = None
    properties: dict[str, str] = field(default_factory=dict)


def _envelope(status: int, type_: str, message: str) -> bytes:
    return json.dumps({"error": {"message": message, "type": type_, "code": status,
                                 "stack": [f"Error ID: {uuid.uuid4()}"]}}).encode()


class FakeCatalog:
    """The catalog side. Use `transport()` to get a Transport routing to it (and the IdP)."""

    def __init__(self, clock: FakeClock, *, credential_lifetime_s: float = 3600.0) -> None:
        self.clock = clock
        self.credential_lifetime_s = credential_lifetime_s
        self.warehouses: dict[str, str] = {"demo": "0198f0c2-1f2e-7b0a-9c4d-5e6f7a8b9c0d"}
        self.namespaces: set[tuple[str, str]] = set()  # (warehouse id, casefolded joined ns)
        self.tables: dict[tuple[str, tuple[str, ...], str], FakeTable] = {}
        self.calls: Counter[str] = Counter()
        self.requests: list[tuple[str, dict[str, str]]] = []
        self.faults: dict[str, deque[Fault]] = {}
        self.gates: dict[str, asyncio.Event] = {}
        self.valid_tokens: set[str] | None = None
        self.vended = itertools.count(1)
        self.no_expiry = False
        self.send_date = True
        self.date_offset_s = 0.0  # the catalog's clock minus real time (a wrong catalog clock)

    # -- setup ----------------------------------------------------------------
    @property
    def warehouse_id(self) -> str:
        return self.warehouses["demo"]

    def add_table(self, namespace: tuple[str, ...], name: str, *, fmt: str = "lance",
                  warehouse: str = "demo") -> FakeTable:
        wid = self.warehouses[warehouse]
        self.namespaces.add((wid, "\x1f".join(namespace).casefold()))
        table = FakeTable(name=name, format=fmt,
                          base_location=f"s3://bucket/{'/'.join(namespace)}/{name}")
        self.tables[(wid, tuple(p.casefold() for p in namespace), name.casefold())] = table
        return table

    def fail(self, op: str, fault: Fault, times: int = 1) -> None:
        self.faults.setdefault(op, deque()).extend(fault for _ in range(times))

    def hold(self, op: str) -> asyncio.Event:
        """Make `op` wait until the returned event is set (a latency gate)."""
        ev = asyncio.Event()
        self.gates[op] = ev
        return ev

    def transport(self, idp: FakeIdP | None = None) -> FakeTransport:
        return FakeTransport(self, idp)

    # -- serving ----------------------------------------------------------------
    def _credential(self, table: FakeTable, access: str) -> dict[str, Any]:
        n = next(self.vended)
        expires_ms = int((self.clock.true_now() + self.credential_lifetime_s) * 1000)
        config = {
            "s3.region": "us-east-1", "client.region": "us-east-1",
            "s3.endpoint": "http://s3.test/", "s3.path-style-access": "true",
            "s3.access-key-id": f"AKFAKE{n:06d}", "s3.secret-access-key": f"secret-{n}",
            "s3.session-token": f"session-{n}-{access}",
        }
        if not self.no_expiry:
            config["s3.session-token-expires-at-ms"] = str(expires_ms)
            config["expiration-time"] = str(expires_ms)
        return {"prefix": table.base_location, "config": config}

    def _table_json(self, t: FakeTable) -> dict[str, Any]:
        out: dict[str, Any] = {"name": t.name, "format": t.format,
                               "base-location": t.base_location, "protected": False}
        if t.doc is not None:
            out["doc"] = t.doc
        if t.properties:
            out["properties"] = t.properties
        return out

    async def handle(self, method: str, url: str, headers: Mapping[str, str],
                     body: bytes | None) -> RawResponse:
        parts = urlsplit(url)
        raw_segments = parts.path.split("/")[1:]
        segs = [unquote(s) for s in raw_segments]
        query = {k: v[0] for k, v in parse_qs(parts.query).items()}
        op = self._op(method, segs)
        self.calls[op] += 1
        self.requests.append((op, dict(headers)))
        gate = self.gates.get(op)
        if gate is not None:
            await gate.wait()
        queue = self.faults.get(op)
        if queue:
            fault = queue.popleft()
            if fault.drop:
                raise UnavailableError("cannot reach catalog.test: ServerDisconnectedError")
            if fault.timeout:
                raise UpstreamTimeoutError("catalog.test did not answer")
            hdrs = {"retry-after": fault.retry_after} if fault.retry_after else {}
            return RawResponse(fault.status, hdrs,
                               _envelope(fault.status, fault.error_type, "injected fault"))
        if op != "health" and self.valid_tokens is not None:
            auth = headers.get("Authorization", "")
            if auth.removeprefix("Bearer ") not in self.valid_tokens:
                return RawResponse(401, {}, _envelope(401, "Unauthorized", "bad token"))
        return self._route(op, method, segs, query, headers, body)

    @staticmethod
    def _op(method: str, segs: list[str]) -> str:
        if segs == ["health"]:
            return "health"
        if segs[:3] == ["catalog", "v1", "config"]:
            return "config"
        if segs[:2] == ["lakekeeper", "v1"]:
            if len(segs) == 5 and segs[3] == "generic-tables" and segs[4] == "rename":
                return "rename_generic_table"
            if len(segs) == 6:
                return "create_generic_table" if method == "POST" else "list_generic_tables"
            if len(segs) == 7:
                return "drop_generic_table" if method == "DELETE" else "load_generic_table"
            if len(segs) == 8 and segs[7] == "credentials":
                return "load_generic_table_credentials"
        return f"other:{method}:{'/'.join(segs)}"

    def _ok(self, data: Any, status: int = 200) -> RawResponse:
        return RawResponse(status, {"content-type": "application/json"},
                           json.dumps(data).encode() if data is not None else b"")

    def _find(self, segs: list[str]) -> tuple[str, tuple[str, ...], FakeTable | None]:
        wid = segs[2]
        ns = tuple(segs[4].split("\x1f"))
        key = (wid, tuple(p.casefold() for p in ns), segs[6].casefold())
        return wid, ns, self.tables.get(key)

    def _route(self, op: str, method: str, segs: list[str], query: dict[str, str],
               headers: Mapping[str, str], body: bytes | None) -> RawResponse:
        if op == "health":
            return self._ok({"status": "ok"})
        if op == "config":
            name = query.get("warehouse", "")
            wid = self.warehouses.get(name)
            if wid is None:
                return RawResponse(404, {}, _envelope(404, "NoSuchWarehouseException",
                                                      f"A warehouse '{name}' does not exist"))
            return self._ok({"defaults": {"prefix": wid}, "overrides": {"uri": CATALOG_URL}})
        if op in ("load_generic_table", "load_generic_table_credentials", "drop_generic_table"):
            wid, ns, table = self._find(segs)
            if table is None:
                return RawResponse(404, {}, _envelope(404, "NoSuchGenericTableException",
                                                      "Generic table does not exist"))
            if op == "drop_generic_table":
                del self.tables[(wid, tuple(p.casefold() for p in ns), segs[6].casefold())]
                return RawResponse(204, {}, b"")
            access = "write" if headers.get("x-assume-role") == "write-role" else "read"
            if op == "load_generic_table_credentials":
                resp = self._ok({"storage-credentials": [self._credential(table, access)]})
                if self.send_date:  # like any HTTP server: its own (real) clock, whole seconds
                    resp = RawResponse(resp.status, {
                        **resp.headers,
                        "date": formatdate(self.clock.true_now() + self.date_offset_s, usegmt=True),
                    }, resp.body)
                return resp
            out: dict[str, Any] = {"table": self._table_json(table)}
            if headers.get("X-Iceberg-Access-Delegation") != "client-managed":
                cred = self._credential(table, access)
                out["storage-credentials"] = [cred]
                out["config"] = {k: v for k, v in cred["config"].items()
                                 if "expir" not in k}
            return self._ok(out)
        if op == "create_generic_table":
            data = json.loads(body or b"{}")
            ns = tuple(segs[4].split("\x1f"))
            key = (segs[2], tuple(p.casefold() for p in ns), str(data["name"]).casefold())
            if key in self.tables:
                return RawResponse(409, {}, _envelope(409, "GenericTableAlreadyExists",
                                                      "Generic table already exists"))
            t = FakeTable(name=data["name"], format=data["format"],
                          base_location=data.get("base-location")
                          or f"s3://bucket/{'/'.join(ns)}/{data['name']}",
                          doc=data.get("doc"), properties=data.get("properties") or {})
            self.tables[key] = t
            return self._ok({"table": self._table_json(t)})
        if op == "list_generic_tables":
            wid, ns = segs[2], tuple(segs[4].split("\x1f"))
            nsf = tuple(p.casefold() for p in ns)
            rows = [t for (w, n, _), t in self.tables.items() if w == wid and n == nsf]
            start = int(query.get("pageToken", "0"))
            size = int(query.get("pageSize", "100"))
            page = rows[start:start + size]
            out = {"identifiers": [{"namespace": list(ns), "name": t.name, "format": t.format,
                                    "id": t.id} for t in page]}
            if page:
                out["next-page-token"] = str(start + len(page))
            return self._ok(out)
        if op == "rename_generic_table":
            data = json.loads(body or b"{}")
            src, dst = data["source"], data["destination"]
            skey = (segs[2], tuple(p.casefold() for p in src["namespace"]),
                    src["name"].casefold())
            if skey not in self.tables:
                return RawResponse(404, {}, _envelope(404, "NoSuchGenericTableException",
                                                      "Generic table does not exist"))
            t = self.tables.pop(skey)
            t.name = dst["name"]
            self.tables[(segs[2], tuple(p.casefold() for p in dst["namespace"]),
                         dst["name"].casefold())] = t
            return RawResponse(204, {}, b"")
        return self._ok({"echo": "/".join(segs), "method": method})


class FakeIdP:
    """An OAuth2 token endpoint: counts grants, can go down, issues numbered tokens."""

    def __init__(self, *, expires_in: float | None = 3600.0,
                 clock: FakeClock | None = None) -> None:
        self.expires_in = expires_in  # None: not sent (the token's JWT `exp` then says)
        self.jwt_exp_s: float | None = None  # set: tokens are JWTs with this `exp`
        self.clock = clock  # with a clock, answers carry a Date (its real time + date_offset_s)
        self.date_offset_s = 0.0
        self.grants = 0
        self.down = False
        self.requests: list[tuple[dict[str, str], bytes]] = []
        self.gate: asyncio.Event | None = None

    async def handle(self, method: str, url: str, headers: Mapping[str, str],
                     body: bytes | None) -> RawResponse:
        self.requests.append((dict(headers), body or b""))
        if self.gate is not None:
            await self.gate.wait()
        if self.down:
            raise UnavailableError("cannot reach idp.test: ClientConnectorError")
        self.grants += 1
        head = {"content-type": "application/json"}
        if self.clock is not None:
            head["date"] = formatdate(self.clock.true_now() + self.date_offset_s, usegmt=True)
        answer: dict[str, Any] = {"access_token": f"idp-token-{self.grants}",
                                  "token_type": "Bearer"}
        if self.expires_in is not None:
            answer["expires_in"] = self.expires_in
        if self.jwt_exp_s is not None:
            answer["access_token"] = jwt.encode(
                {"exp": int(self.jwt_exp_s), "n": self.grants}, "k" * 32, algorithm="HS256")
        return RawResponse(200, head, json.dumps(answer).encode())


class FakeTransport:
    """Routes requests to the FakeCatalog or the FakeIdP by host."""

    def __init__(self, catalog: FakeCatalog, idp: FakeIdP | None = None) -> None:
        self.catalog = catalog
        self.idp = idp
        self.closed = False

    async def send(self, request: RawRequest) -> RawResponse:
        if self.closed:
            raise UnavailableError("transport closed")
        args = (request.method, request.url, request.headers, request.body)
        if request.url.startswith(TOKEN_URL):
            if self.idp is None:
                raise UnavailableError("cannot reach idp.test")
            return await self.idp.handle(*args)
        return await self.catalog.handle(*args)

    async def close(self) -> None:
        self.closed = True
