"""Structural-attack corpus: the inputs schema-shaped fuzzers never generate.

Why: schemathesis and the random gRPC bytes of hostile.py produce values that fit the schemas, so
they never sent 100,000 nested `[` (a RecursionError that escaped as a 500). This module
generates, for every HTTP route the gateway's own router registers and every gRPC method of its
service table, the structural attacks by category: JSON nesting, giant documents, wrong types at
every field, overlong names, bad percent-encoding and UTF-8, hostile paging, hostile headers,
malformed protobuf and oversized metadata. HTTP cases are whole raw requests (bytes), so no
client library "fixes" a path, a header or a length before it reaches the gateway.

Pure generators: nothing here opens a socket (structural_suite.py sends and counts).
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, cast
from urllib.parse import quote

JSON_CATEGORIES = ("json_nesting", "json_giant", "json_wrong_types", "overlong_strings")
HTTP_CATEGORIES = (*JSON_CATEGORIES, "bad_encoding", "paging", "headers")
MUTATING = ("POST", "PUT", "DELETE")


@dataclass(frozen=True)
class HttpCase:
    """One raw HTTP/1.1 request, the category it counts in and the surface it hits.

    `content_length` is False when the request declares more body than it carries (the sender
    then half-closes, so the exchange ends instead of waiting for bytes that never come).
    """

    category: str
    surface: str
    label: str
    data: bytes
    content_length: bool = True

    def raw(self) -> bytes:
        return self.data


@dataclass(frozen=True)
class RouteShape:
    """A registered route as the corpus needs it: method and pattern (`{wh}` etc. captures)."""

    method: str
    pattern: tuple[str, ...]

    @property
    def path(self) -> str:
        return "/" + "/".join(self.pattern)

    @property
    def surface(self) -> str:
        """native (/v1), aws, lakekeeper (/lakekeeper, /management), catalog or ops."""
        first = self.pattern[0]
        if first == "v1":
            return "aws" if self.pattern[1] == "aws-credentials" else "native"
        return {"management": "lakekeeper"}.get(first, first) if len(self.pattern) > 1 else "ops"

    @property
    def takes_body(self) -> bool:
        return self.method in ("POST", "PUT") and self.pattern[0] not in ("livez", "readyz")


@dataclass(frozen=True)
class Target:
    """Real names on the stack: reads hit an existing table, mutations a table that is absent
    (so no case can drop or rename what the other cases read). Unencoded: `namespace` joins
    its levels with the unit separator, as the native path does."""

    warehouse: str
    namespace: str
    table: str
    absent: str = "sx_absent"


def gateway_routes() -> list[RouteShape]:
    """Every HTTP route of the daemon, read from its own router (a new route is covered
    without editing this corpus). Route construction only binds handlers, so no deps needed."""
    from gateway.metrics import Metrics
    from gateway.surfaces.http_app import HttpDeps, build_router

    deps = HttpDeps(*cast(Any, (None, None, None, Metrics(), None, 1 << 20)))
    return [RouteShape(r.method, r.pattern) for r in build_router(deps).routes()]


def request(method: str, target: bytes, *, headers: list[tuple[bytes, bytes]] | None = None,
            body: bytes | None = None, marker: bool = True) -> bytes:
    """A raw HTTP/1.1 request; Content-Length is added for a body unless a header sets one."""
    head = [(b"Host", b"localhost"), (b"Connection", b"close")]
    if marker:
        head.append((b"X-Lakegate-Request", b"1"))
    extra = headers or []
    names = {k.lower() for k, _ in extra}
    if body is not None:
        head.append((b"Content-Type", b"application/json"))
        if b"content-length" not in names and b"transfer-encoding" not in names:
            head.append((b"Content-Length", str(len(body)).encode()))
    lines = [method.encode() + b" " + target + b" HTTP/1.1"]
    lines += [k + b": " + v for k, v in head + extra]
    return b"\r\n".join(lines) + b"\r\n\r\n" + (body or b"")


def target(route: RouteShape, names: Target, **override: bytes) -> bytes:
    """The route's path with captures filled (raw bytes, as sent)."""
    table = names.absent if route.method in MUTATING else names.table
    values = {"wh": quote(names.warehouse, safe="").encode(),
              "ns": quote(names.namespace, safe="").encode(),
              "table": quote(table, safe="").encode(), **override}
    return b"/" + b"/".join(values.get(p[1:-1], b"x") if p.startswith("{") else p.encode()
                            for p in route.pattern)


# ---- JSON bodies --------------------------------------------------------------------------------

def _ident(ns: str, name: str) -> dict[str, Any]:
    return {"namespace": [ns], "name": name}


def body_template(route: RouteShape, names: Target) -> dict[str, Any]:
    """A well-formed body for the route (names of absent tables), for the per-field attacks."""
    ns, last = names.namespace, route.pattern[-1]
    if last == "rename":
        return {"source": _ident(ns, names.absent), "destination": _ident(ns, "sx_renamed")}
    if last == "invalidate":
        return {"all": False, "warehouse": names.warehouse, "namespace": [ns],
                "table": names.absent}
    if last == "namespaces":
        return {"namespace": ["sx_ns"], "properties": {"k": "v"}}
    if route.pattern[0] == "catalog" and last == "tables":
        return {"name": "sx_new", "location": "s3://sx/new", "stage-create": False,
                "schema": {"type": "struct", "schema-id": 0, "fields": [
                    {"id": 1, "name": "a", "required": False, "type": "long"}]},
                "partition-spec": {"spec-id": 0, "fields": []},
                "write-order": {"order-id": 0, "fields": []}, "properties": {"k": "v"}}
    if route.pattern[0] == "catalog":  # commit to one table
        return {"identifier": _ident(ns, names.absent),
                "requirements": [{"type": "assert-table-uuid", "uuid": "0"}],
                "updates": [{"action": "set-properties", "updates": {"k": "v"}}]}
    loc = "base-location" if route.pattern[0] == "lakekeeper" else "base_location"
    return {"name": "sx_new", "format": "parquet", loc: "s3://sx/new", "doc": "d",
            "properties": {"k": "v"}}


WRONG_TYPES: tuple[Any, ...] = (None, 0, -1, 1.5, True, "", [], {}, ["x"], {"a": "b"}, [[]],
                                2**63, -(2**63), "\u202e\u0000")


def _field_paths(doc: Any, prefix: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    """Every key of every object and the first element of every array, depth first."""
    if isinstance(doc, dict):
        for key, value in doc.items():
            yield (*prefix, key)
            yield from _field_paths(value, (*prefix, key))
    elif isinstance(doc, list) and doc:
        yield (*prefix, 0)
        yield from _field_paths(doc[0], (*prefix, 0))


def _replaced(doc: Any, path: tuple[Any, ...], value: Any, *, drop: bool = False) -> Any:
    copy = json.loads(json.dumps(doc))
    parent = copy
    for step in path[:-1]:
        parent = parent[step]
    if drop:
        del parent[path[-1]]
    else:
        parent[path[-1]] = value
    return copy


def _body_case(category: str, label: str, route: RouteShape, names: Target,
               body: bytes) -> HttpCase:
    return _case(category, route, label, request(route.method, target(route, names), body=body))


def _case(category: str, route: RouteShape, label: str, data: bytes,
          content_length: bool = True) -> HttpCase:
    return HttpCase(category, route.surface, f"{route.method} {route.path} {label}", data,
                    content_length)


def json_cases(routes: list[RouteShape], names: Target) -> Iterator[HttpCase]:
    """Nesting, giant documents, wrong types at every field and overlong strings, per body
    route."""
    giant_keys = b"{" + b",".join(b'"%x":0' % i for i in range(110_000)) + b"}"
    nesting = {
        "100k_open_brackets": b"[" * 100_000,
        "50k_open_objects": b'{"a":' * 50_000,
        "100k_balanced_brackets": b"[" * 100_000 + b"]" * 100_000,
        "20k_mixed": b'[{"a":' * 20_000,
        "depth_65_in_field": b'{"name":"x","properties":' + b"[" * 65 + b"]" * 65 + b"}",
        "depth_1000_in_field": b'{"name":"x","properties":{"k":' + b"[" * 1000 + b"]" * 1000
                               + b"}}",
    }
    giant = {
        "array_150k": b"[" + b"0," * 150_000 + b"0]",
        "array_150k_in_field": b'{"name":"x","properties":[' + b"0," * 150_000 + b"0]}",
        "object_110k_keys": giant_keys,
        "duplicate_key_50k": b"{" + b'"name":"x",' * 50_000 + b'"name":"y"}',
        "over_size_limit": b'{"name":"' + b"x" * (1 << 20) + b'"}',
        "string_900k": b'{"name":"' + b"x" * 900_000 + b'"}',
        "number_5000_digits": b'{"name":' + b"9" * 5000 + b"}",
        "empty_arrays_100k": b"[" + b"[]," * 100_000 + b"[]]",
    }
    for route in routes:
        if not route.takes_body:
            continue
        for label, body in nesting.items():
            yield _body_case("json_nesting", label, route, names, body)
        for label, body in giant.items():
            yield _body_case("json_giant", label, route, names, body)
        template = body_template(route, names)
        for path in _field_paths(template):
            where = "/".join(map(str, path))
            yield _body_case("json_wrong_types", f"missing {where}", route, names,
                             json.dumps(_replaced(template, path, None, drop=True)).encode())
            for value in WRONG_TYPES:
                doc = _replaced(template, path, value)
                yield _body_case("json_wrong_types", f"{where}={json.dumps(value)[:20]}", route,
                                 names, json.dumps(doc).encode())
            for size in (300, 70_000):
                doc = _replaced(template, path, "n" * size)
                yield _body_case("overlong_strings", f"{where}=str*{size}", route, names,
                                 json.dumps(doc).encode())
        for label, doc in (("top_level_array", [template]), ("top_level_string", "x"),
                           ("extra_unknown_field", {**template, "sx_extra": {"a": [1]}}),
                           ("namespace_50k_levels", {**template, "namespace": ["a"] * 50_000})):
            yield _body_case("json_wrong_types", label, route, names, json.dumps(doc).encode())


def overlong_path_cases(routes: list[RouteShape], names: Target) -> Iterator[HttpCase]:
    """Overlong names and ids in path segments and query values (below and beyond the
    server's request-line limit)."""
    for route in routes:
        captures = [p[1:-1] for p in route.pattern if p.startswith("{")]
        for capture in captures:
            for size in (256, 1025, 7000, 20_000):
                t = target(route, names, **{capture: b"n" * size})
                yield _case("overlong_strings", route, f"{capture}*{size}",
                            request(route.method, t))
            t = target(route, names, **{capture: b"%1F".join([b"l"] * 1500)})
            yield _case("overlong_strings", route, f"{capture} 1500 levels",
                        request(route.method, t))
        for key in (b"warehouse", b"access", b"vended"):
            t = target(route, names) + b"?" + key + b"=" + b"v" * 7000
            yield _case("overlong_strings", route, f"?{key!r}*7000", request(route.method, t))


# ---- paths and query strings: percent-encoding and UTF-8 -------------------------------------

BAD_SEGMENTS: tuple[bytes, ...] = (
    b"%", b"%F", b"%ZZ", b"%%", b"%u0041", b"%FF", b"%C3", b"%C3%28", b"%C0%AF", b"%ED%A0%80",
    b"%F4%90%80%80", b"%00", b"%2F", b"%2E%2E", b"..", b".", b"%25%FF", b"%EF%BB%BF",
    b"a%1F%1Fb", b"%1F", b"\xff", b"\xc3\x28", b"\xe2\x80\xae", b"\x80abc", b"\xed\xa0\x80",
    b"\x7f", b"a\tb", b"\x00",
)
BAD_QUERIES: tuple[bytes, ...] = (
    b"%FF", b"a=%FF", b"%FF=1", b"access=%", b"access=%ZZ", b"access=\xff", b"access=%C3%28",
    b"warehouse=%ED%A0%80", b"vended=%00", b"purgeRequested=\xc3", b"=", b"&&&", b"==&=",
    b"access=read&access=%FF", b"%FF" * 2000, b"a=%2", b"a=\x80", b"a=%E2%80%AE",
)


def encoding_cases(routes: list[RouteShape], names: Target) -> Iterator[HttpCase]:
    """Bad percent-encoding and invalid UTF-8 in every capture, literal and query string."""
    for route in routes:
        base = target(route, names)
        body = b"{}" if route.takes_body else None
        for capture in [p[1:-1] for p in route.pattern if p.startswith("{")]:
            for bad in BAD_SEGMENTS:
                t = target(route, names, **{capture: bad})
                yield _case("bad_encoding", route, f"{capture}={bad!r}",
                            request(route.method, t, body=body))
        for query in BAD_QUERIES:
            yield _case("bad_encoding", route, f"?{query[:20]!r}",
                        request(route.method, base + b"?" + query, body=body))
        first = route.pattern[0].encode()
        for mangled in (b"%" + first[:1].hex().encode() + first[1:],  # an encoded literal
                        first + b"\xff", b"/" + first, first + b"%2F"):
            t = b"/" + mangled + base[len(first) + 1:]
            yield _case("bad_encoding", route, f"literal {mangled[:12]!r}",
                        request(route.method, t, body=body))
    for raw_target in (b"*", b"http://gateway/v1/openapi.json", b"v1/openapi.json", b"//v1",
                       b"/\xff\xfe", b"/%", b"/.."):
        yield HttpCase("bad_encoding", "raw", f"GET {raw_target!r}", request("GET", raw_target))


# ---- paging -------------------------------------------------------------------------------

PAGE_SIZES: tuple[bytes, ...] = (
    b"-1", b"0", b"1", b"-9223372036854775809", b"9223372036854775808", b"9" * 100, b"1e3",
    b"1.5", b"abc", b"", b"%205", b"0x10", b"+5", b"%D9%A3", b"5%00", b"1_000", b"NaN",
    b"inf", b"%FF", b"2147483648", b"-0",
)


def page_tokens() -> tuple[bytes, ...]:
    """Garbage base64, wrong JSON inside valid base64, escapes and very long tokens."""
    b64 = [base64.urlsafe_b64encode(raw).rstrip(b"=") for raw in (
        b"\x00\xff" * 40, b'{"a":' * 500, b'{"offset":-1}', b'{"offset":1e999}', b"[]",
        b"\xff" * 3)]
    return (b"", b"!!!!", b"====", b"A", b"AAAAA", b"%FF%FE", b"%00", b"..%2F..", b"a+b/c=",
            b"\xff\xfe", *b64, b"A" * 7000, b"A" * 100_000)


def paging_cases(routes: list[RouteShape], names: Target) -> Iterator[HttpCase]:
    """Hostile pageToken/pageSize (both spellings) on every list route."""
    lists = [r for r in routes if r.method == "GET"
             and r.pattern[-1] in ("tables", "generic-tables", "namespaces")]
    for route in lists:
        base = target(route, names) + b"?"
        for size in PAGE_SIZES:
            for key in (b"pageSize", b"page_size"):
                yield _case("paging", route, f"{key!r}={size[:20]!r}",
                            request("GET", base + key + b"=" + size))
        for token in page_tokens():
            for key in (b"pageToken", b"page_token"):
                yield _case("paging", route, f"{key!r}={token[:20]!r}",
                            request("GET", base + key + b"=" + token))
        for query in (b"pageToken=a&pageToken=b", b"pageSize=1&pageSize=-1",
                      b"pageSize=-1&pageToken=%FF", b"page_size=0&pageSize=0"):
            yield _case("paging", route, f"{query!r}", request("GET", base + query))


# ---- headers ------------------------------------------------------------------------------

def header_attacks() -> list[tuple[str, list[tuple[bytes, bytes]], bytes | None]]:
    """(label, extra headers, body or None to use the route's own)."""
    many = [(b"X-H-%d" % i, b"v") for i in range(1000)]
    return [
        ("huge_header_100k", [(b"X-Big", b"a" * 100_000)], None),
        ("header_8000", [(b"X-Big", b"a" * 8000)], None),
        ("huge_authorization", [(b"Authorization", b"Bearer " + b"a" * 100_000)], None),
        ("authorization_8000", [(b"Authorization", b"Bearer " + b"a" * 8000)], None),
        ("huge_header_name", [(b"X" * 10_000, b"v")], None),
        ("1000_headers", many, None),
        ("10000_headers", [(b"X-H-%d" % i, b"v") for i in range(10_000)], None),
        ("repeated_authorization", [(b"Authorization", b"Bearer a"),
                                    (b"Authorization", b"Bearer b")], None),
        ("bearer_and_basic", [(b"Authorization", b"Bearer a"),
                              (b"Authorization", b"Basic YTpi")], None),
        ("authorization_empty", [(b"Authorization", b"")], None),
        ("authorization_bare", [(b"Authorization", b"Bearer")], None),
        ("authorization_utf8", [(b"Authorization", b"Bearer \xff\xfe")], None),
        ("conflicting_content_length", [(b"Content-Length", b"2"), (b"Content-Length", b"7")],
         b"{}"),
        ("content_length_list", [(b"Content-Length", b"2, 7")], b"{}"),
        ("content_length_negative", [(b"Content-Length", b"-1")], b"{}"),
        ("content_length_garbage", [(b"Content-Length", b"abc")], b"{}"),
        ("content_length_huge", [(b"Content-Length", b"9" * 30)], b"{}"),
        ("content_length_and_chunked", [(b"Content-Length", b"2"),
                                        (b"Transfer-Encoding", b"chunked")],
         b"2\r\n{}\r\n0\r\n\r\n"),
        ("bad_chunk", [(b"Transfer-Encoding", b"chunked")], b"zz\r\n{}\r\n0\r\n\r\n"),
        ("chunked_identity", [(b"Transfer-Encoding", b"chunked, identity")], b"{}"),
        ("transfer_gzip", [(b"Transfer-Encoding", b"gzip")], b"{}"),
        ("content_encoding_gzip", [(b"Content-Encoding", b"gzip")], b"\x1f\x8b\x08garbage"),
        ("charset_utf16", [(b"Content-Type", b"application/json; charset=utf-16")], None),
        ("repeated_marker", [(b"X-Lakegate-Request", b"0")], None),
        ("repeated_host", [(b"Host", b"evil")], None),
        ("request_id_huge", [(b"X-Request-Id", b"r" * 7000)], None),
        ("request_id_utf8", [(b"X-Request-Id", b"\xff\xfe\x80")], None),
        ("header_nul", [(b"X-Bad", b"a\x00b")], None),
        ("header_name_space", [(b"Bad Name", b"x")], None),
        ("obs_fold", [(b"X-Fold", b"a\r\n b")], None),
        ("expect_continue", [(b"Expect", b"100-continue")], None),
        ("upgrade_h2c", [(b"Connection", b"Upgrade, HTTP2-Settings"), (b"Upgrade", b"h2c")],
         None),
        ("upgrade_websocket", [(b"Connection", b"Upgrade"), (b"Upgrade", b"websocket")], None),
    ]


def header_cases(routes: list[RouteShape], names: Target) -> Iterator[HttpCase]:
    """Oversized, repeated and conflicting headers on every route (framing attacks included:
    a GET with a lying body is as hostile as a POST)."""
    attacks = header_attacks()
    for route in routes:
        t = target(route, names)
        for label, headers, body in attacks:
            if body is None and route.takes_body:
                body = b"{}"
            honest = not label.startswith(("conflicting", "content_length"))
            yield _case("headers", route, label,
                        request(route.method, t, headers=headers, body=body), honest)


def http_corpus(names: Target, routes: list[RouteShape] | None = None) -> Iterator[HttpCase]:
    """The whole HTTP corpus, every category, over every route of the gateway's router."""
    routes = gateway_routes() if routes is None else routes
    yield from json_cases(routes, names)
    yield from overlong_path_cases(routes, names)
    yield from encoding_cases(routes, names)
    yield from paging_cases(routes, names)
    yield from header_cases(routes, names)
