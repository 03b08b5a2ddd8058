"""Iceberg catalog routes the stack needs: `/catalog/v1/config` and namespaces
(Lakekeeper's rest-catalog-open-api.yaml, docs/docs/api/ in https://github.com/lakekeeper/lakekeeper)."""

from __future__ import annotations

import uuid
from typing import Any

from aiohttp import web

from devstack.emulator import routes_iceberg, routes_views
from devstack.emulator.errors import ApiError, not_found_warehouse
from devstack.emulator.models import Namespace, Warehouse
from devstack.emulator.names import decode_namespace_segment, validate_namespace
from devstack.emulator.pagination import (
    PAGE_SIZE_DEFAULT,
    PAGE_SIZE_MAX,
    Cursor,
    clamp_page_size,
    decode_token,
    encode_token,
)
from devstack.emulator.routes_iceberg import ENDPOINTS as ICEBERG_TABLE_ENDPOINTS
from devstack.emulator.routes_transactions import ENDPOINTS as TRANSACTION_ENDPOINTS
from devstack.emulator.routes_views import ENDPOINTS as VIEW_ENDPOINTS
from devstack.emulator.state import (
    namespace_from_path,
    project_of,
    query_bool,
    query_page_size,
    state_of,
    warehouse_from_prefix,
)
from devstack.emulator.store import ConflictError
from devstack.emulator.wire import CreateNamespace, read_json

NS = "/catalog/v1/{prefix}/namespaces"
ENDPOINTS = (
    "GET /v1/{prefix}/namespaces",
    "POST /v1/{prefix}/namespaces",
    "GET /v1/{prefix}/namespaces/{namespace}",
    "HEAD /v1/{prefix}/namespaces/{namespace}",
    "DELETE /v1/{prefix}/namespaces/{namespace}",
    *ICEBERG_TABLE_ENDPOINTS,  # routes_iceberg.py
    *TRANSACTION_ENDPOINTS,  # routes_transactions.py
    *VIEW_ENDPOINTS,  # routes_views.py
)


async def get_config(request: web.Request) -> web.Response:
    st = state_of(request)
    raw = request.query.get("warehouse")
    if not raw:
        raise ApiError(400, "GetConfigNoWarehouseProvided", "No warehouse specified")
    project = project_of(request)
    name = raw
    head, sep, tail = raw.partition("/")
    if sep:
        try:
            project = str(uuid.UUID(head))
            name = tail
        except ValueError:
            name = raw
    wh = st.store.get_warehouse_by_name(project, name)
    if wh is None or wh.status != "active":
        raise not_found_warehouse(f"A warehouse '{name}' does not exist")
    defaults = {"prefix": wh.id, "rest-page-size": "100"}
    if wh.soft_delete and wh.storage_profile.get("push-s3-delete-disabled", True):
        defaults["s3.delete-enabled"] = "false"
    base = f"{request.scheme}://{request.host}"
    return web.json_response(
        {
            "defaults": defaults,
            "overrides": {"uri": f"{base}/catalog"},
            "endpoints": list(ENDPOINTS),
            "idempotency-key-lifetime": "PT30M",
        }
    )


def _location(wh: Warehouse) -> str:
    """Lakekeeper 0.13's default (flat) layout emits no namespace directory: `<base>`."""
    return wh.base_location


def _ns_json(wh: Warehouse, ns: Namespace, with_uuid: bool) -> dict[str, Any]:
    props = {"location": _location(wh), **ns.properties}
    out: dict[str, Any] = {"namespace": ns.parts, "properties": props}
    if with_uuid:
        out["namespace-uuid"] = ns.id
    return out


async def create_namespace(request: web.Request) -> web.Response:
    st = state_of(request)
    wh = warehouse_from_prefix(request)
    body = await read_json(request, CreateNamespace)
    validate_namespace(body.namespace, creating=True)
    if len(body.namespace) > 1 and st.store.get_namespace(wh.id, body.namespace[:-1]) is None:
        raise ApiError(404, "NoSuchNamespaceException", "Parent namespace does not exist")
    try:
        ns = st.store.create_namespace(wh.id, body.namespace, body.properties or {})
    except ConflictError as exc:
        raise ApiError(409, "AlreadyExistsException", "Namespace already exists") from exc
    return web.json_response(_ns_json(wh, ns, False))


async def list_namespaces(request: web.Request) -> web.Response:
    st = state_of(request)
    wh = warehouse_from_prefix(request)
    parent_raw = request.query.get("parent")
    parent = decode_namespace_segment(parent_raw) if parent_raw else None
    if parent is not None:
        validate_namespace(parent)
        if st.store.get_namespace(wh.id, parent) is None:
            raise ApiError(404, "NoSuchNamespaceException", "Parent namespace does not exist")
    token = request.query.get("pageToken")
    # `fetch_until_full_page`: 1000 per page without a token, 100 with one; partial -> no token.
    size = clamp_page_size(query_page_size(request), PAGE_SIZE_DEFAULT if token else PAGE_SIZE_MAX)
    after = decode_token(token) if token else None
    rows = st.store.list_namespaces(wh.id, parent, after, size)
    out: dict[str, Any] = {"namespaces": [ns.parts for ns, _ in rows]}
    if query_bool(request, "returnUuids", False):
        out["namespace-uuids"] = [ns.id for ns, _ in rows]
    if len(rows) >= size:
        last: Cursor = rows[-1][1]
        out["next-page-token"] = encode_token(last)
    return web.json_response(out)


async def get_namespace(request: web.Request) -> web.Response:
    wh = warehouse_from_prefix(request)
    ns = namespace_from_path(request, wh)
    return web.json_response(_ns_json(wh, ns, query_bool(request, "returnUuid", False)))


async def namespace_exists(request: web.Request) -> web.Response:
    wh = warehouse_from_prefix(request)
    namespace_from_path(request, wh)
    return web.Response(status=204)


async def drop_namespace(request: web.Request) -> web.Response:
    st = state_of(request)
    wh = warehouse_from_prefix(request)
    ns = namespace_from_path(request, wh)
    recursive = query_bool(request, "recursive", False)
    if not recursive and (
        st.store.namespace_has_children(ns) or routes_iceberg.namespace_has_tables(request, ns)
        or routes_views.namespace_has_views(request, ns)
    ):
        raise ApiError(409, "NamespaceNotEmptyException", "Namespace is not empty")
    st.store.drop_namespace(ns, recursive=recursive)
    if recursive:
        routes_iceberg.forget_dropped_namespaces(request, wh)
    return web.Response(status=204)


def add_routes(app: web.Application) -> None:
    app.router.add_get("/catalog/v1/config", get_config, name="config")
    app.router.add_post(NS, create_namespace, name="create_namespace")
    app.router.add_get(NS, list_namespaces, name="list_namespaces")
    # HEAD here is the spec's namespaceExists (204), registered below.
    app.router.add_get(NS + "/{namespace}", get_namespace, name="get_namespace", allow_head=False)
    app.router.add_head(NS + "/{namespace}", namespace_exists, name="namespace_exists")
    app.router.add_delete(NS + "/{namespace}", drop_namespace, name="drop_namespace")
