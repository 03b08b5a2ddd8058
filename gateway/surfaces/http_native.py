"""The native `/v1` HTTP API (docs/contracts.md §4): JSON snake_case, warehouse by name or id.

Parse and render only: the pipeline (http_pipeline.py) has already counted, admitted and
contextualised the request. Credential answers carry the remaining lifetime and the cache
outcome (hit, miss, coalesced, stale), so callers and tests can see what the gateway did.

The credential route is the hot path: its parsed target and its pre-rendered body are kept in
the route match's memo, so a cache hit only formats `remaining_s` and `outcome`.
"""

from __future__ import annotations

import json
from collections.abc import Coroutine
from typing import Any

from aiohttp import web

from gateway.identity import ExpectedIdentity
from gateway.models import (
    AccessMode,
    CredentialLookup,
    GenericTable,
    ListResult,
    LoadResult,
    TableRef,
)
from gateway.surfaces.bytes_response import BytesResponse
from gateway.surfaces.http_codec import (
    call_ref,
    call_target,
    namespace_list,
    namespace_of,
    parse_access,
    parse_bool,
    parse_page_size,
    required_string,
    warehouse_of,
)
from gateway.surfaces.http_pipeline import HttpApi
from gateway.surfaces.http_routing import AnyRoute, HttpCall, Match, OpenRoute, Route
from gateway.surfaces.openapi import openapi_document
from gateway.surfaces.render import (
    NO_STORE,
    RenderedBody,
    credential_json,
    json_response,
)

_WH = ("v1", "warehouses", "{wh}")
_TABLES = (*_WH, "namespaces", "{ns}", "tables")
_TABLE = (*_TABLES, "{table}")


def credentials_doc(lookup: CredentialLookup) -> dict[str, Any]:
    """The `CredentialsResponse` JSON of the contract."""
    creds = lookup.credentials
    return {
        "warehouse_id": lookup.warehouse.id,
        "namespace": list(lookup.ref.namespace),
        "table": lookup.ref.name,
        "access": lookup.access.value,
        "location": creds.location,
        "table_id": creds.table_id,
        "expires_at_ms": creds.expires_at_ms,
        "remaining_s": lookup.remaining_s,
        "outcome": lookup.outcome.value,
        "identity_ttl_s": lookup.identity_ttl_s,
        "credentials": [credential_json(c, with_expiry=True) for c in creds.credentials],
    }


def credentials_body(lookup: CredentialLookup) -> RenderedBody:
    """`credentials_doc` pre-rendered around its per-request fields.

    The rendered bytes equal `json.dumps(credentials_doc(lookup), separators=(",", ":"))`.
    """
    doc = credentials_doc(lookup)
    head = {k: doc[k] for k in ("warehouse_id", "namespace", "table", "access", "location",
                                "table_id", "expires_at_ms")}
    return RenderedBody(
        lookup,
        json.dumps(head, separators=(",", ":"))[:-1].encode() + b',"remaining_s":',
        b',"credentials":' + json.dumps(doc["credentials"], separators=(",", ":")).encode()
        + b"}",
    )


def memo_body(match: Match, lookup: CredentialLookup) -> bytes:
    """The CredentialsResponse bytes, reusing the match's pre-rendered body when it fits."""
    body = match.body
    if body is None or not body.fits(lookup):
        body = match.body = credentials_body(lookup)
    return body.render(lookup)


def _expects(call: HttpCall) -> bool:
    """Whether the query names an expected identity (`expected_location` / `table_id`): read
    once per target, the query being part of the match's key; the hot path parses no more."""
    match = call.match
    expects = match.expects
    if expects is None:
        qs = call.request.query_string
        expects = match.expects = "expected_location" in qs or "table_id" in qs
    return expects


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


class NativeApi(HttpApi):
    """Handlers of the `/v1` routes."""

    def render_load(self, result: LoadResult) -> dict[str, Any]:
        return load_doc(result)

    def routes(self) -> list[AnyRoute]:
        return [*self.admitted_routes(), *self.open_routes()]

    def admitted_routes(self) -> list[Route]:
        return [
            Route("GET", (*_TABLE, "credentials"), self.credentials, "http", "credential"),
            Route("GET", _TABLE, self.load, "http", "metadata"),
            Route("DELETE", _TABLE, self.drop, "http", "metadata"),
            Route("GET", _TABLES, self.list, "http", "metadata"),
            Route("POST", _TABLES, self.create, "http", "metadata"),
            Route("POST", (*_WH, "tables", "rename"), self.rename, "http", "metadata"),
            Route("GET", _WH, self.warehouse, "http", "metadata"),
            Route("POST", ("v1", "cache", "invalidate"), self.invalidate, "http", "admin"),
        ]

    def open_routes(self) -> list[OpenRoute]:
        """The contract document: public, neither admitted nor counted."""
        return [OpenRoute("GET", ("v1", "openapi.json"), self.openapi)]

    def credentials(self, call: HttpCall) -> BytesResponse | Coroutine[Any, Any, BytesResponse]:
        """A confirmed cache hit for a caller the policy allowed is answered at once (no
        coroutine: the pipeline awaits only what is not an answer yet); every other request
        is `_credentials`, the same steps in the same order with the awaits they need."""
        ref, access = call_target(call)
        if not self._gate.authorize_now(call.caller, call.ctx, ref.scope, access):
            return self._credentials(call, ref, access, authorized=False)
        if not _expects(call):
            lookup = self._ops.credentials_now(ref, access, call.ctx)
            if lookup is not None:
                call.tally.served(lookup.outcome, lookup.remaining_s)
                return BytesResponse(memo_body(call.match, lookup), self._d.date, NO_STORE)
        return self._credentials(call, ref, access, authorized=True)

    async def _credentials(self, call: HttpCall, ref: TableRef, access: AccessMode, *,
                           authorized: bool) -> BytesResponse:
        if not authorized:
            await self._authorize(call, ref, access)
        if _expects(call):
            query = call.request.query
            expect = ExpectedIdentity.of(query.get("expected_location"), query.get("table_id"))
            lookup = await self._ops.get_credentials(ref, access, call.ctx, expect=expect)
        else:  # `credentials` asked credentials_now already when it could authorize at once
            lookup = ((None if authorized else self._ops.credentials_now(ref, access, call.ctx))
                      or await self._ops.get_credentials(ref, access, call.ctx))
        call.tally.served(lookup.outcome, lookup.remaining_s)
        return BytesResponse(memo_body(call.match, lookup), self._d.date, NO_STORE)

    async def load(self, call: HttpCall) -> web.StreamResponse:
        ref = call_ref(call)
        query = call.request.query
        vended = bool(parse_bool(query.get("vended"), "vended", False))
        access = parse_access(query.get("access"))
        await self._authorize(call, ref, access)
        result = await self._ops.load_table(ref, call.ctx, vended=vended, access=access)
        call.tally.served(result.outcome or "miss")
        return json_response(load_doc(result),
                             headers={"Cache-Control": NO_STORE} if vended else None)

    async def list(self, call: HttpCall) -> web.StreamResponse:
        warehouse, namespace = warehouse_of(call.params), namespace_of(call.params)
        query = call.request.query
        page_size = parse_page_size(query.get("page_size"))
        result = await self._list(call, warehouse, namespace, page_token=query.get("page_token"),
                                  page_size=page_size)
        return json_response(list_doc(result))

    async def warehouse(self, call: HttpCall) -> web.StreamResponse:
        wh = await self._gate.authorize_warehouse(call.caller, call.ctx,
                                                  warehouse_of(call.params))
        return json_response({"warehouse_id": wh.id, "name": wh.name})

    async def invalidate(self, call: HttpCall) -> web.StreamResponse:
        body = await self._body(call)
        if body.get("all") is True:
            self._gate.authorize_global(call.caller)
            count = self._ops.invalidate(all=True)
        else:
            ref = TableRef(
                warehouse=required_string(body, "warehouse"),
                namespace=namespace_list(body.get("namespace")),
                name=required_string(body, "table"),
            )
            await self._authorize(call, ref, AccessMode.WRITE)
            # A name never seen (callers used the UUID) is resolved upstream; unknown: 404.
            await self._ops.resolve_warehouse(ref.warehouse, call.ctx)
            count = self._ops.invalidate(ref)
        call.tally.served("hit")
        return json_response({"invalidated": count})

    async def openapi(self, request: web.BaseRequest) -> web.StreamResponse:
        return json_response(openapi_document())
