"""The Iceberg REST table routes (`/catalog/v1/{prefix}/...`): the gateway is pyiceberg's catalog.

What is forwarded and what is cached:
- Table metadata is never cached. Load, exists, list, create, commit, drop and rename go to the
  catalog every time, so a scan right after a commit (through any gateway) sees that commit.
- A load is forwarded with `client-managed` delegation (the catalog vends nothing for it) and
  the caller's credentials are merged in from the credential cache, the same cache as generic
  tables (single-flight, refresh-ahead, serve floor; key kind "iceberg", fetched from the
  catalog's `GET .../tables/{t}/credentials`). So N concurrent loads of a warm table cost N
  metadata loads and no credential call.
- A vended load carries the gateway's own ETag (iceberg_etag.py); Iceberg Java's
  `If-None-Match` revalidation gets a 304 while metadata and credential are both current.
- `GET .../tables/{t}/credentials` (Iceberg's credential refresh) is served from the cache.
- `client.refresh-credentials-endpoint` always names the gateway, never the catalog.
- A caller asking for `remote-signing` (on an S3 table) gets no key: the load's `config` names
  the node's signer (surfaces/http_signer.py) and its credential refresh answers an empty list.
- Credentials are vended by the caller's policy: write if it may write, else read (the
  read/write roles of the generic surface). Create and commit need write; a commit that moves
  the table (`set-location`), a create, drop and rename invalidate the table's cached
  credentials, which are scoped to the table location. A cached credential whose prefix does
  not cover the loaded table's location (the table was re-created elsewhere behind the
  gateway's back) is dropped and fetched again.
- Create is forwarded with the caller's delegation header (a staged create has no table yet to
  vend for through the cache), and its refresh endpoints are rewritten to the gateway.
Bodies are parsed under the same limits as every other JSON body before they are forwarded.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any
from urllib.parse import quote, urlsplit

from aiohttp import web

from gateway.errors import InvalidRequestError
from gateway.identity import covers
from gateway.models import (
    EXPIRY_KEY_PREFIXES,
    EXPIRY_KEYS,
    AccessMode,
    CredentialLookup,
    TableRef,
)
from gateway.names import check_warehouse
from gateway.signing.config import on_s3, sign_endpoint, signing_config
from gateway.surfaces import iceberg_etag
from gateway.surfaces.accounting import result_for_status
from gateway.surfaces.http_codec import call_ref, decode_segment, namespace_of, warehouse_of
from gateway.surfaces.http_lakekeeper import (
    LakekeeperApi,
    load_kind,
    upstream_path,
    upstream_query,
    wants_credentials,
)
from gateway.surfaces.http_routing import HttpCall, Route
from gateway.surfaces.lakekeeper_compat import (
    DELEGATION_HEADER,
    REFRESH_ENDPOINT_KEY,
    asks_signing,
    gateway_refresh_endpoints,
)
from gateway.surfaces.render import config_strings, dumps, json_response

_NS = ("catalog", "v1", "{wh}", "namespaces", "{ns}")
_TABLES = (*_NS, "tables")
_TABLE = (*_TABLES, "{table}")
_ENDPOINT_NAMES = {"{ns}": "{namespace}"}  # route captures → the spec's path parameter names
# Compared lower-cased: "ETag".title() is "Etag", so a title-case list never passed the tag.
_PASS_HEADERS = frozenset({"content-type", "retry-after", "etag"})
CLIENT_MANAGED = {DELEGATION_HEADER: "client-managed"}
# What a forward is rebuilt from: (warehouse, namespace levels or None, table or None), the
# objects the policy decided on.
Target = tuple[str, tuple[str, ...] | None, str | None]


def iceberg_ref(call: HttpCall) -> TableRef:
    """The target's TableRef of kind "iceberg" (memoized on the route match)."""
    ref = call.match.ref
    if ref is None or ref.kind != "iceberg":
        ref = call.match.ref = dataclasses.replace(call_ref(call), kind="iceberg")
    return ref


def _rebased(url: str, base: str) -> str:
    parts = urlsplit(url)
    return base + parts.path + (f"?{parts.query}" if parts.query else "")


def _base(call: HttpCall) -> str:
    return f"{call.request.scheme}://{call.request.host}"


def storage_credentials(lookup: CredentialLookup, base: str) -> list[dict[str, Any]]:
    """The cached credentials as Iceberg `storage-credentials`, refresh URL on the gateway."""
    out = []
    for cred in lookup.credentials.credentials:
        config = config_strings(cred.config)
        if REFRESH_ENDPOINT_KEY in config:
            config[REFRESH_ENDPOINT_KEY] = _rebased(config[REFRESH_ENDPOINT_KEY], base)
        out.append({"prefix": cred.prefix, "config": config})
    return out


def load_config(upstream: dict[str, Any], creds: list[dict[str, Any]],
                location: str) -> dict[str, str]:
    """Lakekeeper's load `config`: the catalog's storage keys plus the raw credential keys of
    the credential covering `location` (no expiry keys, no refresh endpoint)."""
    config = {k: v for k, v in upstream.items() if isinstance(v, str)}
    best: dict[str, Any] | None = None
    for cred in creds:
        prefix = str(cred["prefix"]).rstrip("/")
        if covers(prefix, location) and (best is None or len(prefix) > len(best["prefix"])):
            best = cred
    if best is not None:
        for key, value in best["config"].items():
            expiry = key in EXPIRY_KEYS or key.startswith(EXPIRY_KEY_PREFIXES)
            if not expiry and key != REFRESH_ENDPOINT_KEY:
                config[key] = value
    return config


def _covers(lookup: CredentialLookup, location: str) -> bool:
    return any(covers(c.prefix, location) for c in lookup.credentials.credentials)


def _moves_table(doc: dict[str, Any]) -> bool:
    """Whether a commit changes the table location or creates it (credentials are scoped to
    the location, so they must be fetched again)."""
    updates = doc.get("updates")
    requirements = doc.get("requirements")
    moves = isinstance(updates, list) and any(
        isinstance(u, dict) and u.get("action") == "set-location" for u in updates)
    creates = isinstance(requirements, list) and any(
        isinstance(r, dict) and r.get("type") == "assert-create" for r in requirements)
    return moves or creates


def iceberg_endpoints(routes: list[Route]) -> frozenset[str]:
    """The Iceberg REST endpoint names (`GET /v1/{prefix}/namespaces/{namespace}`, as in
    `/config`) of the routes mounted under `/catalog/v1/{prefix}`; a GET route serves HEAD too
    (the router answers HEAD with the GET handler)."""
    out: set[str] = set()
    for route in routes:
        if route.pattern[:3] != ("catalog", "v1", "{wh}"):
            continue
        rest = "/".join(_ENDPOINT_NAMES.get(p, p) for p in route.pattern[3:])
        path = f"/v1/{{prefix}}/{rest}"
        out.add(f"{route.method} {path}")
        if route.method == "GET":
            out.add(f"HEAD {path}")
    return frozenset(out)


class IcebergApi(LakekeeperApi):
    """Handlers of the Iceberg table routes and `/config` (the Lakekeeper-compatible surface's
    policy)."""

    _served: frozenset[str] | None = None

    def routes(self) -> list[Route]:
        ice = self.route
        return [
            ice("GET", _TABLES, self.list_iceberg),
            ice("POST", _TABLES, self.create_iceberg),
            ice("HEAD", _TABLE, self.forward_table),  # before GET: the router maps HEAD to GET
            ice("GET", _TABLE, self.load_iceberg, load_kind),
            ice("POST", _TABLE, self.commit_iceberg),
            ice("DELETE", _TABLE, self.drop_iceberg),
            ice("GET", (*_TABLE, "credentials"), self.iceberg_credentials, "credential"),
            ice("POST", ("catalog", "v1", "{wh}", "tables", "rename"), self.rename_iceberg),
            ice("GET", ("catalog", "v1", "config"), self.config),
        ]

    def served_endpoints(self) -> frozenset[str]:
        """What `/config` may advertise: the Iceberg endpoints this surface has routes for (its
        own and the namespace forwards of the Lakekeeper surface), so the list cannot drift
        from the routes."""
        if self._served is None:
            self._served = iceberg_endpoints([*LakekeeperApi.routes(self), *self.routes()])
        return self._served

    async def config(self, call: HttpCall) -> web.StreamResponse:
        """The catalog's `/v1/config`, pointed back at the gateway, advertising only the
        endpoints the gateway serves (an Iceberg client must not try the others here)."""
        request = call.request
        warehouse = request.query.get("warehouse")
        if not warehouse:
            raise InvalidRequestError("query parameter 'warehouse' is required")
        # A caller learns the warehouse's id and endpoints only where it holds a grant.
        await self._gate.authorize_warehouse(call.caller, call.ctx, check_warehouse(warehouse))
        cfg = dict(await self._ops.catalog_config(check_warehouse(warehouse), call.ctx))
        overrides = dict(cfg.get("overrides") or {})
        # Point Iceberg clients back at the gateway, not at the catalog behind it.
        overrides["uri"] = f"{request.scheme}://{request.host}/catalog"
        cfg["overrides"] = overrides
        if isinstance(cfg.get("endpoints"), list):
            served = self.served_endpoints()
            cfg["endpoints"] = [e for e in cfg["endpoints"] if e in served]
        return json_response(cfg)

    async def _upstream(self, call: HttpCall, target: Target, body: bytes | None = None,
                        headers: dict[str, str] | None = None) -> tuple[int, bytes, dict[str, str]]:
        """Forward the request with the gateway's token to the path rebuilt from `target`
        (prefix = the warehouse UUID): the objects the policy decided on, never the raw path."""
        request = call.request
        warehouse, namespace, table = target
        wh = await self._ops.resolve_warehouse(warehouse, call.ctx)
        path = upstream_path(call.match.route.pattern, wh.id, namespace, table)
        upstream = await self._ops.forward(request.method, path, upstream_query(request), body,
                                           call.ctx, headers=headers)
        if upstream.status >= 400:
            call.tally.served(result_for_status(upstream.status))
        out_headers = {k: v for k, v in upstream.headers.items() if k.lower() in _PASS_HEADERS}
        return upstream.status, upstream.body, out_headers

    async def _passthrough(self, call: HttpCall, target: Target, body: bytes | None = None,
                           headers: dict[str, str] | None = None) -> web.StreamResponse:
        status, out, out_headers = await self._upstream(call, target, body, headers)
        out = gateway_refresh_endpoints(out, _base(call))
        return web.Response(status=status, body=out, headers=out_headers)

    async def _json_bytes(self, call: HttpCall) -> tuple[dict[str, Any], bytes]:
        """The body parsed under the JSON limits (hostile input stops here), and its bytes."""
        doc = await self._body(call)
        return doc, await call.request.read()

    # ------------------------------------------------------------------ reads
    async def list_iceberg(self, call: HttpCall) -> web.StreamResponse:
        warehouse, namespace = warehouse_of(call.params), namespace_of(call.params)
        await self._authorize_namespace(call, warehouse, namespace, AccessMode.READ)
        return await self._passthrough(call, (warehouse, namespace, None))

    async def forward_table(self, call: HttpCall) -> web.StreamResponse:
        ref = iceberg_ref(call)
        await self._authorize(call, ref, AccessMode.READ)
        return await self._passthrough(call, ref.scope)

    async def load_iceberg(self, call: HttpCall) -> web.StreamResponse:
        """Metadata from the catalog (client-managed), credentials from the cache."""
        ref = iceberg_ref(call)
        access = await self._vend_access(call, ref)
        if not wants_credentials(call.request):
            return await self._passthrough(call, ref.scope, headers=CLIENT_MANAGED)
        held = iceberg_etag.parse(call.request.headers.get("If-None-Match"))
        if held is not None:
            # A revalidation (Iceberg Java's table cache): 304 only if the catalog's metadata
            # and the credential the client holds are both still current (iceberg_etag.py).
            lookup = await self._ops.get_credentials(ref, access, call.ctx)
            if iceberg_etag.still_valid(held, lookup):
                status, body, headers = await self._upstream(
                    call, ref.scope, headers={**CLIENT_MANAGED, "If-None-Match": held.upstream})
                if status == 304:
                    call.tally.served(lookup.outcome, lookup.remaining_s)
                    return web.Response(status=304, headers={"ETag": held.render()})
                return await self._merged(call, ref, access, status, body, headers)
        # Metadata first: a load of a missing table (create-if-absent) costs no credential call.
        status, body, headers = await self._upstream(call, ref.scope, headers=CLIENT_MANAGED)
        return await self._merged(call, ref, access, status, body, headers)

    async def _merged(self, call: HttpCall, ref: TableRef, access: AccessMode, status: int,
                      body: bytes, headers: dict[str, str]) -> web.StreamResponse:
        """The catalog's client-managed load with the caller's cached credentials merged in,
        tagged with the gateway's own ETag."""
        if status >= 400:
            return web.Response(status=status, body=body, headers=headers)
        try:
            doc = json.loads(body)
        except ValueError:
            doc = None
        if not isinstance(doc, dict) or not isinstance(doc.get("metadata"), dict):
            return web.Response(status=status, body=body, headers=headers)
        location = str(doc["metadata"].get("location") or "")
        if self._d.signing is not None and asks_signing(call.request) and on_s3(location):
            return await self._signing_load(call, ref, doc, location, status, headers)
        lookup = await self._ops.get_credentials(ref, access, call.ctx)
        if location and not _covers(lookup, location):
            # Re-created elsewhere behind this gateway's back: the cached credential is stale.
            self._ops.invalidate(ref)
            lookup = await self._ops.get_credentials(ref, access, call.ctx)
        if self._d.signing is not None and not lookup.credentials.credentials and on_s3(location):
            # Nothing vended (a warehouse without STS): Lakekeeper then answers with its
            # signer, the gateway with its own.
            return await self._signing_load(call, ref, doc, location, status, headers)
        call.tally.served(lookup.outcome, lookup.remaining_s)
        creds = storage_credentials(lookup, _base(call))
        upstream_config = doc.get("config")
        doc["config"] = load_config(upstream_config if isinstance(upstream_config, dict) else {},
                                    creds, location)
        if creds:
            doc["storage-credentials"] = creds
        # The catalog's ETag describes its client-managed body: the merged one gets the
        # gateway's tag, which names the catalog's and the credential served.
        upstream_tag = next((v for k, v in headers.items() if k.title() == "Etag"), None)
        headers = {k: v for k, v in headers.items() if k.title() != "Etag"}
        tag = iceberg_etag.issue(upstream_tag, lookup)
        if tag is not None:
            headers["ETag"] = tag.render()
        return web.Response(status=status, body=dumps(doc), headers=headers)

    async def _signing_load(self, call: HttpCall, ref: TableRef, doc: dict[str, Any],
                            location: str, status: int,
                            headers: dict[str, str]) -> web.StreamResponse:
        """A load for a caller that asked for `remote-signing`: no key, the node's signer
        (gateway/signing/config.py); the table's address is remembered for the signer."""
        upstream_config = doc.get("config") if isinstance(doc.get("config"), dict) else {}
        p = call.params
        doc["config"] = signing_config(upstream_config, f"{_base(call)}/catalog/",
                                       sign_endpoint(p["wh"], p["ns"], p["table"]))
        doc.pop("storage-credentials", None)
        wh = await self._ops.resolve_warehouse(ref.warehouse, call.ctx)
        assert self._d.signing is not None
        self._d.signing.remember(wh.id, ref, location, upstream_config or {})
        call.tally.served("miss")
        headers = {k: v for k, v in headers.items() if k.title() != "Etag"}
        return web.Response(status=status, body=dumps(doc), headers=headers)

    async def iceberg_credentials(self, call: HttpCall) -> web.StreamResponse:
        """Iceberg's credential refresh endpoint, answered from the cache (empty for a caller
        that asked for `remote-signing`: it gets no key, as Lakekeeper answers it)."""
        ref = iceberg_ref(call)
        access = await self._vend_access(call, ref)
        if self._d.signing is not None and asks_signing(call.request):
            return web.Response(body=b'{"storage-credentials":[]}',
                                content_type="application/json")
        lookup = await self._ops.get_credentials(ref, access, call.ctx)
        call.tally.served(lookup.outcome, lookup.remaining_s)
        doc = {"storage-credentials": storage_credentials(lookup, _base(call))}
        return web.Response(body=dumps(doc), content_type="application/json")

    # ------------------------------------------------------------------ mutations
    async def create_iceberg(self, call: HttpCall) -> web.StreamResponse:
        warehouse, namespace = warehouse_of(call.params), namespace_of(call.params)
        doc, raw = await self._json_bytes(call)
        name = doc.get("name")
        if not isinstance(name, str):
            raise InvalidRequestError("'name' must be a string")
        ref = TableRef(warehouse, namespace, name, kind="iceberg")
        await self._authorize(call, ref, AccessMode.WRITE)
        self._ops.invalidate(ref)
        try:
            if self._d.signing is not None and asks_signing(call.request):
                return await self._signing_create(call, ref, raw)
            return await self._passthrough(call, (warehouse, namespace, None), raw)
        finally:
            self._ops.invalidate(ref)

    async def _signing_create(self, call: HttpCall, ref: TableRef,
                              raw: bytes) -> web.StreamResponse:
        """A create for a caller that asked for `remote-signing`: the catalog's answer with its
        signer (or any key) replaced by the node's signer for the new table."""
        status, body, headers = await self._upstream(call, (ref.warehouse, ref.namespace, None),
                                                     raw)
        try:
            doc = json.loads(body) if status == 200 else None
        except ValueError:
            doc = None
        if not isinstance(doc, dict):
            return web.Response(status=status, body=body, headers=headers)
        config = doc.get("config") if isinstance(doc.get("config"), dict) else {}
        p = call.params
        doc["config"] = signing_config(config, f"{_base(call)}/catalog/", sign_endpoint(
            p["wh"], p["ns"], quote(ref.name, safe="")))
        doc.pop("storage-credentials", None)
        return web.Response(status=status, body=dumps(doc), headers=headers)

    async def commit_iceberg(self, call: HttpCall) -> web.StreamResponse:
        """Commit to the table the body names, by Lakekeeper's rule (`commit_target`): that
        one table is what the policy decides on, the audit line names and the upstream path
        is rebuilt from, so the catalog cannot commit to a table the policy never saw."""
        doc, raw = await self._json_bytes(call)
        ref = commit_target(iceberg_ref(call), doc.get("identifier"))
        await self._authorize(call, ref, AccessMode.WRITE)
        try:
            return await self._passthrough(call, ref.scope, raw)
        finally:
            if _moves_table(doc):
                self._ops.invalidate(ref)

    async def drop_iceberg(self, call: HttpCall) -> web.StreamResponse:
        ref = iceberg_ref(call)
        await self._authorize(call, ref, AccessMode.WRITE)
        try:
            return await self._passthrough(call, ref.scope)
        finally:
            self._ops.invalidate(ref)

    async def rename_iceberg(self, call: HttpCall) -> web.StreamResponse:
        """Rename: the body is parsed once into the two tables the policy decides on, and the
        catalog is sent a body rebuilt from them (never the caller's bytes, which another
        JSON reader could read differently)."""
        warehouse = decode_segment(call.params["wh"], "warehouse")
        doc = await self._body(call)
        refs = [iceberg_ident(warehouse, doc.get(side), side)
                for side in ("source", "destination")]
        for ref in refs:
            await self._authorize(call, ref, AccessMode.WRITE)
        body = dumps({side: {"namespace": list(ref.namespace), "name": ref.name}
                      for side, ref in zip(("source", "destination"), refs, strict=True)})
        try:
            return await self._passthrough(call, (warehouse, None, None), body)
        finally:
            for ref in refs:
                self._ops.invalidate(ref)


def iceberg_ident(warehouse: str, value: Any, what: str) -> TableRef:
    """An Iceberg `TableIdentifier` object ({namespace: [...], name}) as a TableRef (the name
    rules of every path apply).

    Raises:
        InvalidRequestError: not an identifier, or a name the rules refuse.
    """
    if not isinstance(value, dict):
        raise InvalidRequestError(f"'{what}' must be a table identifier")
    ns, name = value.get("namespace"), value.get("name")
    if (not isinstance(ns, list) or not all(isinstance(p, str) for p in ns)
            or not isinstance(name, str)):
        raise InvalidRequestError(f"'{what}' needs 'namespace' (strings) and 'name'")
    return TableRef(warehouse, tuple(ns), name, kind="iceberg")


def commit_target(path: TableRef, identifier: Any) -> TableRef:
    """The table an Iceberg commit changes: Lakekeeper's rule (`determine_table_ident`,
    crates/lakekeeper/src/server/tables.rs), applied before anything is decided.

    - no `identifier` in the body: the path's table;
    - the identifier equals the path's table (levels and name compared exactly, after the
      path's `+` became a space, as Lakekeeper reads an Iceberg path): that table;
    - the branch shape Spark sends for `ns.table.branch_x` (path namespace `ns.table`, path
      table `branch_x`, identifier `ns` / `table`): the identifier's table, whatever the
      path's table name is;
    - anything else: 400 `TableIdentifierMismatch`, Lakekeeper's own answer.

    Raises:
        InvalidRequestError: the identifier is malformed or names another table.
    """
    if identifier is None:
        return path
    named = iceberg_ident(path.warehouse, identifier, "identifier")
    levels = tuple(level.replace("+", " ") for level in path.namespace)
    table = path.name.replace("+", " ")
    if (named.namespace, named.name) == (levels, table):
        return path
    if len(levels) >= 2 and (named.namespace, named.name) == (levels[:-1], levels[-1]):
        return named
    raise InvalidRequestError(
        "Table identifier in path does not match the one in the request body",
        lakekeeper_type="TableIdentifierMismatch")

