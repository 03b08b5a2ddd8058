"""The Lakekeeper-compatible REST surface: same paths, bodies and envelopes as Lakekeeper.

So pylakekeeper 0.4.0, curl scripts and other clients work unchanged with `base_url=<gateway>`
(tests/integration/gateway/test_pylakekeeper.py; the routes: docs/contracts.md §5): raw-path
segment decoding, `%1F` namespaces, kebab-case JSON with
string-only config values and never-null `protected`/`properties`, pagination tokens passed
through, 404/409 statuses, the error envelope, `{prefix}` = warehouse UUID or name.

Loads and credential reads are answered from the cache (vending as Lakekeeper does: with the
caller's delegation mode, which is part of the cache key, and the highest access the caller's
policy allows); mutations are forwarded and invalidate the cache. `/management/v1/whoami` and
`/management/v1/warehouse/{id}` are answered locally; anything else under the Lakekeeper mounts is
404 RouteNotAllowed (the management API stays closed).
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote, urlencode

from aiohttp import web

from gateway.models import (
    AccessMode,
    CredentialLookup,
    GenericTable,
    LoadResult,
    TableRef,
)
from gateway.names import join_namespace
from gateway.signing.config import on_s3
from gateway.surfaces.accounting import Kind, result_for_status
from gateway.surfaces.bytes_response import BytesResponse
from gateway.surfaces.callers import whoami
from gateway.surfaces.http_codec import (
    call_ref,
    namespace_list,
    namespace_of,
    parent_of,
    parse_page_size,
    warehouse_of,
)
from gateway.surfaces.http_pipeline import HttpApi
from gateway.surfaces.http_routing import HttpCall, Match, Route
from gateway.surfaces.lakekeeper_compat import (
    asks_signing,
    client_managed,
    header_lines,
    lakekeeper_bool,
)
from gateway.surfaces.render import (
    NO_STORE,
    RenderedBody,
    config_strings,
    credential_json,
    dumps,
    json_body_response,
    json_response,
)

_GT = ("lakekeeper", "v1", "{wh}", "namespaces", "{ns}", "generic-tables")
_NS = ("catalog", "v1", "{wh}", "namespaces")
_PASS_HEADERS = ("Content-Type", "Retry-After", "ETag")


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
    if result.credentials:  # Lakekeeper omits `storage-credentials` when nothing was vended
        doc["storage-credentials"] = [
            credential_json(c, with_expiry=False) for c in result.credentials
        ]
    return doc


def storage_credentials_body(match: Match, lookup: CredentialLookup) -> bytes:
    """`{"storage-credentials": [...]}` bytes, rendered once per served credential set.

    Depends on the credential set only (kept in the route match's memo); a rotated credential
    is a new set object, so `fits` re-renders it at once.
    """
    body = match.body
    if body is None or not body.fits(lookup):
        creds = [credential_json(c, with_expiry=False) for c in lookup.credentials.credentials]
        body = match.body = RenderedBody(lookup, dumps({"storage-credentials": creds}))
    return body.render(lookup)


def _signing_asked_on_s3(call: HttpCall, location: str) -> bool:
    """A caller listing `remote-signing` for a table on S3: it must never receive a key."""
    return asks_signing(call.request) and on_s3(location)


def wants_credentials(request: web.BaseRequest) -> bool:
    """Lakekeeper vends on load unless the caller asked for `client-managed` only."""
    return not client_managed(header_lines(request.headers))


def load_kind(request: web.BaseRequest) -> Kind:
    """A load that vends credentials counts as a credential request, else as metadata."""
    return "credential" if wants_credentials(request) else "metadata"


def upstream_path(pattern: tuple[str, ...], warehouse_id: str,
                  namespace: tuple[str, ...] | None = None, table: str | None = None) -> str:
    """The catalog path of a forwarded route, rebuilt from what the request was parsed into.

    The route's literals, the warehouse UUID (the catalog's `{prefix}`), and the namespace levels
    and table name the policy decided on, each percent-encoded again (levels joined with
    Lakekeeper's `%1F`). Never the raw request path: a segment the caller spelt so that the URL
    library or the catalog reads it differently (a `#`, `%2E%2E`) cannot name another object.

    Raises:
        ValueError: the pattern captures a namespace or table that was not given (a bug).
    """
    out = []
    for part in pattern:
        if part == "{wh}":
            out.append(quote(warehouse_id, safe=""))
        elif part == "{ns}":
            if namespace is None:
                raise ValueError(f"route {pattern} forwards a namespace it was not given")
            out.append(quote(join_namespace(namespace), safe=""))
        elif part == "{table}":
            if table is None:
                raise ValueError(f"route {pattern} forwards a table it was not given")
            out.append(quote(table, safe=""))
        else:
            out.append(part)
    return "/" + "/".join(out)


def upstream_query(request: web.BaseRequest) -> str:
    """The query as the gateway parsed it, encoded again (a `?parent=` namespace included)."""
    return urlencode(list(request.query.items()), quote_via=quote)


class LakekeeperApi(HttpApi):
    """Handlers of the Lakekeeper-compatible routes."""

    BASE_LOCATION_KEY = "base-location"
    PASS_EXTRA = True  # schema, statistics: Lakekeeper fields the gateway does not model
    PURGE_KEY = "purgeRequested"

    def parse_bool(self, value: str | None, what: str, default: bool | None) -> bool | None:
        return lakekeeper_bool(value, what, default)

    def render_load(self, result: LoadResult) -> dict[str, Any]:
        return load_json(result)

    @staticmethod
    def route(method: str, pattern: tuple[str, ...], handler: Any,
              kind: Any = "metadata") -> Route:
        """A route of this surface (`rest`), counted as metadata unless `kind` says otherwise."""
        return Route(method, pattern, handler, "rest", kind)

    def routes(self) -> list[Route]:
        lk = self.route
        return [
            lk("POST", _GT, self.create),
            lk("GET", _GT, self.list),
            lk("GET", (*_GT, "{table}"), self.load, load_kind),
            lk("DELETE", (*_GT, "{table}"), self.drop),
            lk("GET", (*_GT, "{table}", "credentials"), self.credentials, "credential"),
            lk("POST", ("lakekeeper", "v1", "{wh}", "generic-tables", "rename"), self.rename),
            lk("GET", _NS, self.forward_namespaces),
            lk("POST", _NS, self.forward_namespaces),
            lk("GET", (*_NS, "{ns}"), self.forward_namespaces),
            lk("GET", ("management", "v1", "whoami"), self.whoami),
            lk("GET", ("management", "v1", "warehouse", "{wh}"), self.warehouse),
        ]

    async def _vend_access(self, call: HttpCall, ref: TableRef) -> AccessMode:
        """Lakekeeper vends by the principal's permission: write if the policy allows it."""
        await self._authorize(call, ref, AccessMode.READ)
        if await self._gate.allowed(call.caller, call.ctx, ref.scope, AccessMode.WRITE):
            return AccessMode.WRITE
        return AccessMode.READ

    # -------------------------------------------------------------- generic tables
    async def load(self, call: HttpCall) -> web.StreamResponse:
        ref = call_ref(call)
        access = await self._vend_access(call, ref)
        if not wants_credentials(call.request):
            return await self._client_managed_load(call, ref)
        result = await self._ops.load_table(ref, call.ctx, vended=True, access=access)
        if not result.credentials or _signing_asked_on_s3(call, result.table.base_location):
            # Nothing vended: Lakekeeper's answer is the client-managed one. A caller asking for
            # remote-signing on S3 gets no key either (the node signs Iceberg tables only).
            return await self._client_managed_load(call, ref)
        call.tally.served(result.outcome or "miss")
        return json_response(load_json(result))

    async def _client_managed_load(self, call: HttpCall, ref: TableRef) -> web.StreamResponse:
        """Lakekeeper's client-managed answer (table plus the storage region/endpoint `config`,
        no credentials), passed through from the catalog: rare (pylakekeeper never asks for
        it), and only the catalog knows the storage profile's keys."""
        wh = await self._ops.resolve_warehouse(ref.warehouse, call.ctx)
        path = upstream_path(call.match.route.pattern, wh.id, ref.namespace, ref.name)
        upstream = await self._ops.forward(
            "GET", path, upstream_query(call.request), None, call.ctx,
            headers={"X-Iceberg-Access-Delegation": "client-managed"})
        call.tally.served(result_for_status(upstream.status) if upstream.status >= 400
                          else "miss")
        headers = {k: v for k, v in upstream.headers.items() if k.title() in _PASS_HEADERS}
        return web.Response(status=upstream.status, body=upstream.body, headers=headers)

    async def credentials(self, call: HttpCall) -> BytesResponse:
        ref = call_ref(call)
        access = await self._vend_access(call, ref)
        lookup = await self._ops.get_credentials(ref, access, call.ctx)
        call.tally.served(lookup.outcome, lookup.remaining_s)
        creds = lookup.credentials
        location = creds.location or next((c.prefix for c in creds.credentials), "")
        if _signing_asked_on_s3(call, location):
            # Lakekeeper's answer when only signing was selected: no credential
            return json_body_response(b'{"storage-credentials":[]}', self._d.date)
        return json_body_response(storage_credentials_body(call.match, lookup), self._d.date,
                                  NO_STORE)

    async def list(self, call: HttpCall) -> web.StreamResponse:
        warehouse, namespace = warehouse_of(call.params), namespace_of(call.params)
        query = call.request.query
        page_size = parse_page_size(query.get("pageSize"))
        if page_size is not None:  # Lakekeeper clamps to [1, pagination_size_max]
            page_size = max(1, min(self._d.max_page_size, page_size))
        result = await self._list(call, warehouse, namespace, page_token=query.get("pageToken"),
                                  page_size=page_size)
        identifiers = []
        for ident in result.identifiers:
            # Lakekeeper echoes the request path's namespace (its case), not the stored one.
            entry: dict[str, Any] = {"namespace": list(namespace), "name": ident.name}
            if ident.format is not None:
                entry["format"] = ident.format
            if ident.id is not None:
                entry["id"] = ident.id
            identifiers.append(entry)
        doc: dict[str, Any] = {"identifiers": identifiers}
        if result.next_page_token is not None:  # Lakekeeper omits a null token
            doc["next-page-token"] = result.next_page_token
        return json_response(doc)

    async def forward_namespaces(self, call: HttpCall) -> web.StreamResponse:
        request, params, ctx = call.request, call.params, call.ctx
        warehouse = warehouse_of(params)
        namespace: tuple[str, ...] | None = None
        body: bytes | None = None
        if "ns" in params:
            namespace = namespace_of(params)
            await self._authorize_namespace(call, warehouse, namespace, AccessMode.READ)
        elif request.method == "GET":
            parent = parent_of(request.query)
            if parent is not None:  # the children of a namespace: that namespace's policy
                await self._authorize_namespace(call, warehouse, parent, AccessMode.READ)
            else:  # the top level: only a caller holding a grant in the warehouse
                await self._gate.authorize_warehouse(call.caller, ctx, warehouse)
        if request.method == "POST":
            doc = await self._body(call)
            await self._authorize_namespace(call, warehouse, namespace_list(doc.get("namespace")),
                                            AccessMode.WRITE)
            body = await request.read()
        wh = await self._ops.resolve_warehouse(warehouse, ctx)
        path = upstream_path(call.match.route.pattern, wh.id, namespace)
        upstream = await self._ops.forward(request.method, path, upstream_query(request), body,
                                           ctx)
        if upstream.status >= 400:
            call.tally.served(result_for_status(upstream.status))
        headers = {k: v for k, v in upstream.headers.items() if k.title() in _PASS_HEADERS}
        return web.Response(status=upstream.status, body=upstream.body, headers=headers)

    async def whoami(self, call: HttpCall) -> web.StreamResponse:
        call.tally.served("hit")
        doc = whoami(call.caller)
        doc["id"] = f"oidc~{call.caller.name}"  # Lakekeeper's user id form (`oidc~<sub>`)
        return json_response(doc)

    async def warehouse(self, call: HttpCall) -> web.StreamResponse:
        wh = await self._gate.authorize_warehouse(call.caller, call.ctx, warehouse_of(call.params))
        return json_response({"id": wh.id, "warehouse-id": wh.id, "name": wh.name})
