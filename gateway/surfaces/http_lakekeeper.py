"""The Lakekeeper-compatible REST surface: same paths, bodies and envelopes as Lakekeeper.

So pylakekeeper 0.4.0, curl scripts and other clients work unchanged with `base_url=<gateway>`
(reference pylakekeeper.md §12): raw-path segment decoding, `%1F` namespaces, kebab-case JSON with
string-only config values and never-null `protected`/`properties`, pagination tokens passed
through, 404/409 statuses, the error envelope, `{prefix}` = warehouse UUID or name.

Loads and credential reads are answered from the cache (vending as Lakekeeper does: with the
caller's delegation mode, which is part of the cache key, and the highest access the caller's
policy allows); mutations are forwarded and invalidate the cache. `/management/v1/whoami` and
`/management/v1/warehouse/{id}` are answered locally; anything else under the Lakekeeper mounts is
404 RouteNotAllowed (the management API stays closed).
"""

from __future__ import annotations

import json
from typing import Any

from aiohttp import web

from gateway.errors import InvalidRequestError
from gateway.models import (
    AccessMode,
    CallerIdentity,
    CreateTableSpec,
    CredentialLookup,
    GenericTable,
    LoadResult,
    RequestContext,
    TableRef,
)
from gateway.surfaces.callers import whoami
from gateway.surfaces.http_app import HttpDeps
from gateway.surfaces.http_codec import (
    config_strings,
    context_of,
    credential_json,
    decode_segment,
    json_response,
    parse_bool,
    parse_namespace,
    parse_page_size,
    read_json,
    string_field,
    string_map,
)
from gateway.surfaces.http_native import json_body_response, rename_pair
from gateway.surfaces.http_routing import Call, Match, Route

_GT = ("lakekeeper", "v1", "{prefix}", "namespaces", "{ns}", "generic-tables")
_NS = ("catalog", "v1", "{prefix}", "namespaces")
_CREATE_KEYS = {"name", "format", "base-location", "doc", "properties"}
_PASS_HEADERS = ("Content-Type", "Retry-After", "ETag")
# The Iceberg endpoints the gateway serves; `/config` advertises only these (not the catalog's).
SERVED_ICEBERG_ENDPOINTS = frozenset({
    "GET /v1/{prefix}/namespaces",
    "POST /v1/{prefix}/namespaces",
    "GET /v1/{prefix}/namespaces/{namespace}",
    "HEAD /v1/{prefix}/namespaces/{namespace}",
    "GET /v1/{prefix}/namespaces/{namespace}/tables/{table}/credentials",
})


def table_json(table: GenericTable) -> dict[str, Any]:
    """Lakekeeper's GenericTableData: `protected` always a bool; `doc`/`properties` omitted
    when empty, never null (pylakekeeper rejects null)."""
    doc: dict[str, Any] = {
        "name": table.name,
        "format": table.format,
        "base-location": table.base_location,
        "protected": bool(table.protected),
    }
    if table.doc is not None:
        doc["doc"] = table.doc
    if table.properties:
        doc["properties"] = config_strings(table.properties)
    for key, value in table.extra.items():
        doc.setdefault(key, value)
    return doc


def load_json(result: LoadResult) -> dict[str, Any]:
    doc: dict[str, Any] = {"table": table_json(result.table)}
    if result.config is not None:
        doc["config"] = config_strings(result.config)
    if result.credentials is not None:
        doc["storage-credentials"] = [
            credential_json(c, with_expiry=False) for c in result.credentials
        ]
    return doc


def storage_credentials_body(lookup: CredentialLookup, match: Match) -> bytes:
    """`{"storage-credentials": [...]}` bytes, rendered once per served credential set.

    Depends on the credential set only (kept on the route match with it); a rotated credential
    is a new set object, so the identity check re-renders it at once.
    """
    rendered = match.rendered
    if not isinstance(rendered, tuple) or rendered[0] is not lookup.credentials:
        creds = [credential_json(c, with_expiry=False) for c in lookup.credentials.credentials]
        body = json.dumps({"storage-credentials": creds}, separators=(",", ":")).encode()
        rendered = match.rendered = (lookup.credentials, body)
    cached: bytes = rendered[1]
    return cached


def wants_credentials(delegation: str | None) -> bool:
    """Lakekeeper vends on load unless the caller asked for another delegation mode only."""
    if not delegation:
        return True
    modes = {m.strip() for m in delegation.split(",")}
    return "vended-credentials" in modes


class LakekeeperApi:
    """Handlers of the Lakekeeper-compatible routes."""

    def __init__(self, deps: HttpDeps) -> None:
        self._d = deps

    def routes(self) -> list[Route]:
        def lk(method: str, pattern: tuple[str, ...], handler: Any) -> Route:
            return Route(method, pattern, handler, lakekeeper=True)

        return [
            lk("POST", _GT, self.create),
            lk("GET", _GT, self.list),
            lk("GET", (*_GT, "{table}"), self.load),
            lk("DELETE", (*_GT, "{table}"), self.drop),
            lk("GET", (*_GT, "{table}", "credentials"), self.credentials),
            lk("POST", ("lakekeeper", "v1", "{prefix}", "generic-tables", "rename"), self.rename),
            lk("GET", ("catalog", "v1", "config"), self.config),
            lk("GET", _NS, self.forward_namespaces),
            lk("POST", _NS, self.forward_namespaces),
            lk("GET", (*_NS, "{ns}"), self.forward_namespaces),
            lk("GET", (*_NS, "{ns}", "tables", "{table}", "credentials"), self.forward_namespaces),
            lk("GET", ("management", "v1", "whoami"), self.whoami),
            lk("GET", ("management", "v1", "warehouse", "{wh}"), self.warehouse),
        ]

    # -------------------------------------------------------------- helpers
    async def _admit(self, request: web.Request) -> CallerIdentity:
        return await self._d.gate.admit(request.headers.get("Authorization"), request.headers)

    def _parsed_ref(self, call: Call) -> TableRef:
        """`_ref` memoized on the cached route match (a pure function of the raw target)."""
        ref = call.match.parsed
        if not isinstance(ref, TableRef):
            ref = call.match.parsed = self._ref(call.params)
        return ref

    def _ref(self, params: dict[str, str]) -> TableRef:
        return TableRef(
            warehouse=decode_segment(params["prefix"], "warehouse"),
            namespace=parse_namespace(decode_segment(params["ns"], "namespace")),
            name=decode_segment(params["table"], "table"),
        )

    async def _vend_access(self, caller: CallerIdentity, ctx: RequestContext,
                           ref: TableRef) -> AccessMode:
        """Lakekeeper vends by the principal's permission: write if the policy allows it."""
        d = self._d
        await d.gate.authorize(caller, ctx, ref.warehouse, ref.namespace, ref.name, AccessMode.READ)
        if await d.gate.allowed(caller, ctx, ref.warehouse, ref.namespace, ref.name,
                                AccessMode.WRITE):
            return AccessMode.WRITE
        return AccessMode.READ

    # -------------------------------------------------------------- generic tables
    async def load(self, request: web.Request, call: Call) -> web.StreamResponse:
        d = self._d
        vended = wants_credentials(request.headers.get("X-Iceberg-Access-Delegation"))
        with d.recorder.track("rest", "credential" if vended else "metadata") as tally:
            caller = await self._admit(request)
            ref = self._parsed_ref(call)
            ctx = context_of(request, call.request_id, caller)
            access = await self._vend_access(caller, ctx, ref)
            result = await d.ops.load_table(ref, ctx, vended=vended, access=access)
            tally.served(result.outcome or "miss")
            return json_response(load_json(result))

    async def credentials(self, request: web.Request, call: Call) -> web.StreamResponse:
        d = self._d
        with d.recorder.track("rest", "credential") as tally:
            caller = await self._admit(request)
            ref = self._parsed_ref(call)
            ctx = context_of(request, call.request_id, caller)
            access = await self._vend_access(caller, ctx, ref)
            lookup = await d.ops.get_credentials(ref, access, ctx)
            tally.served(lookup.outcome, lookup.remaining_s)
            return json_body_response(storage_credentials_body(lookup, call.match))

    async def list(self, request: web.Request, call: Call) -> web.StreamResponse:
        d = self._d
        with d.recorder.track("rest", "metadata"):
            caller = await self._admit(request)
            warehouse = decode_segment(call.params["prefix"], "warehouse")
            namespace = parse_namespace(decode_segment(call.params["ns"], "namespace"))
            page_size = parse_page_size(request.query.get("pageSize"))
            ctx = context_of(request, call.request_id, caller)
            await d.gate.authorize(caller, ctx, warehouse, namespace, None, AccessMode.READ)
            result = await d.ops.list_tables(
                warehouse, namespace, ctx,
                page_token=request.query.get("pageToken") or None, page_size=page_size,
            )
            identifiers = []
            for ident in result.identifiers:
                entry: dict[str, Any] = {"namespace": list(ident.namespace), "name": ident.name}
                if ident.format is not None:
                    entry["format"] = ident.format
                if ident.id is not None:
                    entry["id"] = ident.id
                identifiers.append(entry)
            return json_response(
                {"identifiers": identifiers, "next-page-token": result.next_page_token}
            )

    async def create(self, request: web.Request, call: Call) -> web.StreamResponse:
        d = self._d
        with d.recorder.track("rest", "metadata"):
            caller = await self._admit(request)
            warehouse = decode_segment(call.params["prefix"], "warehouse")
            namespace = parse_namespace(decode_segment(call.params["ns"], "namespace"))
            body = await read_json(request, d.max_body_bytes)
            spec = CreateTableSpec(
                name=str(string_field(body, "name")),
                format=str(string_field(body, "format")),
                base_location=string_field(body, "base-location", required=False),
                doc=string_field(body, "doc", required=False),
                properties=string_map(body, "properties"),
                extra={k: v for k, v in body.items() if k not in _CREATE_KEYS},
            )
            ctx = context_of(request, call.request_id, caller)
            await d.gate.authorize(caller, ctx, warehouse, namespace, spec.name, AccessMode.WRITE)
            result = await d.ops.create_table(warehouse, namespace, spec, ctx)
            return json_response(load_json(result))

    async def drop(self, request: web.Request, call: Call) -> web.StreamResponse:
        d = self._d
        with d.recorder.track("rest", "metadata"):
            caller = await self._admit(request)
            ref = self._ref(call.params)
            purge = parse_bool(request.query.get("purgeRequested"), "purgeRequested", None)
            force = bool(parse_bool(request.query.get("force"), "force", False))
            ctx = context_of(request, call.request_id, caller)
            await d.gate.authorize(
                caller, ctx, ref.warehouse, ref.namespace, ref.name, AccessMode.WRITE
            )
            await d.ops.drop_table(ref, ctx, purge=purge, force=force)
            return web.Response(status=204)

    async def rename(self, request: web.Request, call: Call) -> web.StreamResponse:
        d = self._d
        with d.recorder.track("rest", "metadata"):
            caller = await self._admit(request)
            warehouse = decode_segment(call.params["prefix"], "warehouse")
            source, destination = rename_pair(await read_json(request, d.max_body_bytes))
            ctx = context_of(request, call.request_id, caller)
            for ns, name in (source, destination):
                await d.gate.authorize(caller, ctx, warehouse, ns, name, AccessMode.WRITE)
            await d.ops.rename_table(warehouse, source, destination, ctx)
            return web.Response(status=204)

    # -------------------------------------------------------------- catalog / management
    async def config(self, request: web.Request, call: Call) -> web.StreamResponse:
        d = self._d
        with d.recorder.track("rest", "metadata"):
            caller = await self._admit(request)
            warehouse = request.query.get("warehouse")
            if not warehouse:
                raise InvalidRequestError("query parameter 'warehouse' is required")
            ctx = context_of(request, call.request_id, caller)
            cfg = dict(await d.ops.catalog_config(warehouse, ctx))
            overrides = dict(cfg.get("overrides") or {})
            # Point Iceberg clients back at the gateway, not at the catalog behind it.
            overrides["uri"] = f"{request.scheme}://{request.host}/catalog"
            cfg["overrides"] = overrides
            if isinstance(cfg.get("endpoints"), list):
                cfg["endpoints"] = [e for e in cfg["endpoints"] if e in SERVED_ICEBERG_ENDPOINTS]
            return json_response(cfg)

    async def forward_namespaces(self, request: web.Request, call: Call) -> web.StreamResponse:
        d = self._d
        with d.recorder.track("rest", "metadata") as tally:
            caller = await self._admit(request)
            params = call.params
            warehouse = decode_segment(params["prefix"], "warehouse")
            ctx = context_of(request, call.request_id, caller)
            body: bytes | None = None
            if "ns" in params:
                namespace = parse_namespace(decode_segment(params["ns"], "namespace"))
                table = decode_segment(params["table"], "table") if "table" in params else None
                await d.gate.authorize(caller, ctx, warehouse, namespace, table, AccessMode.READ)
            if request.method == "POST":
                doc = await read_json(request, d.max_body_bytes)
                ns_value = doc.get("namespace")
                if not isinstance(ns_value, list) or not all(isinstance(p, str) for p in ns_value):
                    raise InvalidRequestError("'namespace' must be an array of strings")
                await d.gate.authorize(caller, ctx, warehouse, tuple(ns_value), None,
                                       AccessMode.WRITE)
                body = await request.read()
            wh = await d.ops.resolve_warehouse(warehouse, ctx)
            raw_path, _, query = request.raw_path.partition("?")
            segments = raw_path.strip("/").split("/")
            segments[2] = wh.id  # the catalog only understands the warehouse UUID as prefix
            upstream = await d.ops.forward(
                request.method, "/" + "/".join(segments), query, body, ctx
            )
            if upstream.status >= 400:
                tally.served("error")
            headers = {k: v for k, v in upstream.headers.items() if k.title() in _PASS_HEADERS}
            return web.Response(status=upstream.status, body=upstream.body, headers=headers)

    async def whoami(self, request: web.Request, call: Call) -> web.StreamResponse:
        d = self._d
        with d.recorder.track("rest", "metadata") as tally:
            caller = await self._admit(request)
            tally.served("hit")
            return json_response(whoami(caller))

    async def warehouse(self, request: web.Request, call: Call) -> web.StreamResponse:
        d = self._d
        with d.recorder.track("rest", "metadata"):
            caller = await self._admit(request)
            given = decode_segment(call.params["wh"], "warehouse")
            wh = await d.ops.resolve_warehouse(given, context_of(request, call.request_id, caller))
            return json_response({"id": wh.id, "warehouse-id": wh.id, "name": wh.name})
