"""The native `/v1` HTTP API (docs/contracts.md §4): JSON snake_case, warehouse by name or id.

Credential answers carry the remaining lifetime and the cache outcome (hit, miss, coalesced,
stale), so callers and tests can see what the gateway did.

The credential route is the hot path (executors ask for the same few tables over and over):
its parsed target is memoized on the cached route match, and its JSON body is kept pre-rendered
per served credential set, so a cache hit only formats `remaining_s` and `outcome`.
"""

from __future__ import annotations

import json
import math
from typing import Any

from aiohttp import web

from gateway.errors import InvalidRequestError
from gateway.models import (
    AccessMode,
    CreateTableSpec,
    CredentialLookup,
    GenericTable,
    ListResult,
    LoadResult,
    Outcome,
    TableRef,
)
from gateway.surfaces.http_app import HttpDeps
from gateway.surfaces.http_codec import (
    context_of,
    credential_json,
    decode_segment,
    json_response,
    namespace_list,
    parse_access,
    parse_bool,
    parse_namespace,
    parse_page_size,
    read_json,
    string_field,
    string_map,
)
from gateway.surfaces.http_routing import Call, Match, Route
from gateway.surfaces.openapi import openapi_document

_WH = ("v1", "warehouses", "{wh}")
_TABLES = (*_WH, "namespaces", "{ns}", "tables")
_TABLE = (*_TABLES, "{table}")


def table_ref(params: dict[str, str]) -> TableRef:
    """The TableRef of a `/v1/warehouses/{wh}/namespaces/{ns}/tables/{table}` path."""
    return TableRef(
        warehouse=decode_segment(params["wh"], "warehouse"),
        namespace=parse_namespace(decode_segment(params["ns"], "namespace")),
        name=decode_segment(params["table"], "table"),
    )


def credential_target(request: web.Request, call: Call) -> tuple[TableRef, AccessMode]:
    """(TableRef, access) of a credential request, parsed once per exact target.

    Memoized on the route match, which is cached per (method, raw target): the parse is a pure
    function of the raw path and query. A target that fails to parse is not memoized (it raises
    InvalidRequestError every time, after the caller was admitted).
    """
    parsed = call.match.parsed
    if parsed is None:
        parsed = (table_ref(call.params), parse_access(request.query.get("access")))
        call.match.parsed = parsed
    ref: TableRef = parsed[0]
    access: AccessMode = parsed[1]
    return ref, access


def credentials_doc(lookup: CredentialLookup) -> dict[str, Any]:
    """The `CredentialsResponse` JSON of the contract."""
    creds = lookup.credentials
    return {
        "warehouse_id": lookup.warehouse.id,
        "namespace": list(lookup.ref.namespace),
        "table": lookup.ref.name,
        "access": lookup.access.value,
        "location": creds.location,
        "expires_at_ms": creds.expires_at_ms,
        "remaining_s": lookup.remaining_s,
        "outcome": lookup.outcome.value,
        "credentials": [credential_json(c, with_expiry=True) for c in creds.credentials],
    }


def _json_number(value: float | None) -> bytes:
    """`value` exactly as json.dumps writes it (float repr; null; NaN/Infinity)."""
    if type(value) is float and math.isfinite(value):
        return float.__repr__(value).encode()
    return json.dumps(value).encode()


_OUTCOME_KEY = b',"outcome":'
_OUTCOME_JSON: dict[str, bytes] = {o.value: json.dumps(o.value).encode() for o in Outcome}


class CredentialsBody:
    """A `CredentialsResponse` pre-rendered for one served credential set.

    Everything but `remaining_s` and `outcome` is fixed by (warehouse, table, access, credential
    set), so it is rendered once; `render()` splices the two per-request fields in. The bytes
    equal `json.dumps(credentials_doc(lookup), separators=(",", ":"))`. A rotated credential is
    a new CredentialSet object: `matches()` compares identities, so it is re-rendered at once.
    """

    __slots__ = ("_head", "_tail", "access", "credentials", "ref", "warehouse_id")

    def __init__(self, lookup: CredentialLookup) -> None:
        self.credentials = lookup.credentials
        self.warehouse_id = lookup.warehouse.id
        self.ref = lookup.ref
        self.access = lookup.access
        doc = credentials_doc(lookup)
        head = {k: doc[k] for k in ("warehouse_id", "namespace", "table", "access", "location",
                                    "expires_at_ms")}
        self._head = json.dumps(head, separators=(",", ":"))[:-1].encode() + b',"remaining_s":'
        self._tail = (b',"credentials":' + json.dumps(doc["credentials"], separators=(",", ":"))
                      .encode() + b"}")

    def matches(self, lookup: CredentialLookup) -> bool:
        return (
            lookup.credentials is self.credentials
            and lookup.warehouse.id == self.warehouse_id
            and (lookup.ref is self.ref or lookup.ref == self.ref)
            and lookup.access is self.access
        )

    def render(self, lookup: CredentialLookup) -> bytes:
        outcome = _OUTCOME_JSON.get(lookup.outcome) or json.dumps(str(lookup.outcome)).encode()
        return b"".join((self._head, _json_number(lookup.remaining_s), _OUTCOME_KEY, outcome,
                         self._tail))


def credentials_body(lookup: CredentialLookup, match: Match) -> bytes:
    """The CredentialsResponse bytes, reusing the match's pre-rendered body when it fits."""
    rendered = match.rendered
    if not isinstance(rendered, CredentialsBody) or not rendered.matches(lookup):
        rendered = match.rendered = CredentialsBody(lookup)
    return rendered.render(lookup)


def json_body_response(body: bytes) -> web.Response:
    return web.Response(body=body, content_type="application/json")


def table_doc(table: GenericTable) -> dict[str, Any]:
    return {
        "name": table.name,
        "format": table.format,
        "base_location": table.base_location,
        "protected": table.protected,
        "doc": table.doc,
        "properties": dict(table.properties),
    }


def load_doc(result: LoadResult) -> dict[str, Any]:
    return {
        "table": table_doc(result.table),
        "config": dict(result.config or {}),
        "credentials": [credential_json(c, with_expiry=True) for c in result.credentials or ()],
        "warehouse_id": result.warehouse.id,
    }


def list_doc(result: ListResult) -> dict[str, Any]:
    return {
        "identifiers": [
            {"namespace": list(i.namespace), "name": i.name, "format": i.format, "id": i.id}
            for i in result.identifiers
        ],
        "next_page_token": result.next_page_token,
    }


class NativeApi:
    """Handlers of the `/v1` routes."""

    def __init__(self, deps: HttpDeps) -> None:
        self._d = deps

    def routes(self) -> list[Route]:
        return [
            Route("GET", (*_TABLE, "credentials"), self.credentials),
            Route("GET", _TABLE, self.load),
            Route("DELETE", _TABLE, self.drop),
            Route("GET", _TABLES, self.list),
            Route("POST", _TABLES, self.create),
            Route("POST", (*_WH, "tables", "rename"), self.rename),
            Route("GET", _WH, self.warehouse),
            Route("POST", ("v1", "cache", "invalidate"), self.invalidate),
            Route("GET", ("v1", "openapi.json"), self.openapi),
        ]

    async def _admit(self, request: web.Request) -> Any:
        return await self._d.gate.admit(request.headers.get("Authorization"), request.headers)

    async def credentials(self, request: web.Request, call: Call) -> web.StreamResponse:
        d = self._d
        with d.recorder.track("http", "credential") as tally:
            caller = await self._admit(request)
            ref, access = credential_target(request, call)
            ctx = context_of(request, call.request_id, caller)
            await d.gate.authorize(caller, ctx, ref.warehouse, ref.namespace, ref.name, access)
            lookup = await d.ops.get_credentials(ref, access, ctx)
            tally.served(lookup.outcome, lookup.remaining_s)
            return json_body_response(credentials_body(lookup, call.match))

    async def load(self, request: web.Request, call: Call) -> web.StreamResponse:
        d = self._d
        with d.recorder.track("http", "metadata") as tally:
            caller = await self._admit(request)
            ref = table_ref(call.params)
            vended = bool(parse_bool(request.query.get("vended"), "vended", False))
            access = parse_access(request.query.get("access"))
            ctx = context_of(request, call.request_id, caller)
            await d.gate.authorize(caller, ctx, ref.warehouse, ref.namespace, ref.name, access)
            result = await d.ops.load_table(ref, ctx, vended=vended, access=access)
            tally.served(result.outcome or "miss")
            return json_response(load_doc(result))

    async def list(self, request: web.Request, call: Call) -> web.StreamResponse:
        d = self._d
        with d.recorder.track("http", "metadata"):
            caller = await self._admit(request)
            warehouse = decode_segment(call.params["wh"], "warehouse")
            namespace = parse_namespace(decode_segment(call.params["ns"], "namespace"))
            page_size = parse_page_size(request.query.get("page_size"))
            ctx = context_of(request, call.request_id, caller)
            await d.gate.authorize(caller, ctx, warehouse, namespace, None, AccessMode.READ)
            result = await d.ops.list_tables(
                warehouse,
                namespace,
                ctx,
                page_token=request.query.get("page_token") or None,
                page_size=page_size,
            )
            return json_response(list_doc(result))

    async def create(self, request: web.Request, call: Call) -> web.StreamResponse:
        d = self._d
        with d.recorder.track("http", "metadata"):
            caller = await self._admit(request)
            warehouse = decode_segment(call.params["wh"], "warehouse")
            namespace = parse_namespace(decode_segment(call.params["ns"], "namespace"))
            body = await read_json(request, d.max_body_bytes)
            spec = CreateTableSpec(
                name=str(string_field(body, "name")),
                format=str(string_field(body, "format")),
                base_location=string_field(body, "base_location", required=False),
                doc=string_field(body, "doc", required=False),
                properties=string_map(body, "properties"),
            )
            ctx = context_of(request, call.request_id, caller)
            await d.gate.authorize(caller, ctx, warehouse, namespace, spec.name, AccessMode.WRITE)
            result = await d.ops.create_table(warehouse, namespace, spec, ctx)
            return json_response(load_doc(result))

    async def drop(self, request: web.Request, call: Call) -> web.StreamResponse:
        d = self._d
        with d.recorder.track("http", "metadata"):
            caller = await self._admit(request)
            ref = table_ref(call.params)
            purge = parse_bool(request.query.get("purge"), "purge", None)
            force = bool(parse_bool(request.query.get("force"), "force", False))
            ctx = context_of(request, call.request_id, caller)
            await d.gate.authorize(
                caller, ctx, ref.warehouse, ref.namespace, ref.name, AccessMode.WRITE
            )
            await d.ops.drop_table(ref, ctx, purge=purge, force=force)
            return web.Response(status=204)

    async def rename(self, request: web.Request, call: Call) -> web.StreamResponse:
        d = self._d
        with d.recorder.track("http", "metadata"):
            caller = await self._admit(request)
            warehouse = decode_segment(call.params["wh"], "warehouse")
            body = await read_json(request, d.max_body_bytes)
            source, destination = rename_pair(body)
            ctx = context_of(request, call.request_id, caller)
            for ns, name in (source, destination):
                await d.gate.authorize(caller, ctx, warehouse, ns, name, AccessMode.WRITE)
            await d.ops.rename_table(warehouse, source, destination, ctx)
            return web.Response(status=204)

    async def warehouse(self, request: web.Request, call: Call) -> web.StreamResponse:
        d = self._d
        with d.recorder.track("http", "metadata"):
            caller = await self._admit(request)
            warehouse = decode_segment(call.params["wh"], "warehouse")
            ctx = context_of(request, call.request_id, caller)
            wh = await d.ops.resolve_warehouse(warehouse, ctx)
            return json_response({"warehouse_id": wh.id, "name": wh.name})

    async def invalidate(self, request: web.Request, call: Call) -> web.StreamResponse:
        d = self._d
        with d.recorder.track("http", "admin") as tally:
            caller = await self._admit(request)
            body = await read_json(request, d.max_body_bytes)
            if body.get("all") is True:
                d.gate.authorize_global(caller)
                count = d.ops.invalidate(all=True)
            else:
                ref = TableRef(
                    warehouse=str(string_field(body, "warehouse")),
                    namespace=namespace_list(body.get("namespace")),
                    name=str(string_field(body, "table")),
                )
                ctx = context_of(request, call.request_id, caller)
                await d.gate.authorize(
                    caller, ctx, ref.warehouse, ref.namespace, ref.name, AccessMode.WRITE
                )
                count = d.ops.invalidate(ref)
            tally.served("hit")
            return json_response({"invalidated": count})

    async def openapi(self, request: web.Request, call: Call) -> web.StreamResponse:
        return json_response(openapi_document())


def rename_pair(
    body: dict[str, Any],
) -> tuple[tuple[tuple[str, ...], str], tuple[tuple[str, ...], str]]:
    """Parse `{"source": {namespace, name}, "destination": {...}}` (both surfaces use it)."""
    out = []
    for key in ("source", "destination"):
        part = body.get(key)
        if not isinstance(part, dict):
            raise InvalidRequestError(f"'{key}' must be an object with namespace and name")
        out.append((namespace_list(part.get("namespace"), f"{key}.namespace"),
                    str(string_field(part, "name"))))
    return out[0], out[1]
