"""Iceberg REST view routes (`/catalog/v1/{prefix}/namespaces/{namespace}/views`, and
`/views/rename`), with Lakekeeper's change events: `createView` (the CreateViewRequest),
`updateView` (the CommitViewRequest; tabular id from the new metadata), `dropView` (no data) and
`renameView` (no data; named as the request spelled its source, `.`-joined, empty prefix).

Views share their namespace's names with tables (a name is one tabular). Metadata files are
really written to storage with a vended credential; a view is dropped without purging its files.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from aiohttp import web
from pyiceberg.view.metadata import ViewMetadata

from devstack.emulator.errors import ApiError, uuid7
from devstack.emulator.events import DOT
from devstack.emulator.models import Namespace, Warehouse
from devstack.emulator.names import validate_namespace
from devstack.emulator.pagination import clamp_page_size, decode_token, next_page
from devstack.emulator.policy import Permission
from devstack.emulator.publish import emit
from devstack.emulator.routes_iceberg import _io_props, _location, _vend, catalog_of
from devstack.emulator.state import (
    namespace_from_body,
    namespace_from_path,
    query_page_size,
    state_of,
    warehouse_from_prefix,
)
from devstack.emulator.store import ConflictError
from devstack.emulator.vending import load_config
from devstack.emulator.views import (
    CommitView,
    CreateView,
    RenameView,
    ViewRow,
    ViewStore,
    apply_view_commit,
    json_of,
    metadata_file,
    new_view_metadata,
    write_view_metadata,
)
from devstack.emulator.wire import read_json

VIEWS = "/catalog/v1/{prefix}/namespaces/{namespace}/views"
RENAME = "/catalog/v1/{prefix}/views/rename"
ENDPOINTS = (
    "GET /v1/{prefix}/namespaces/{namespace}/views",
    "POST /v1/{prefix}/namespaces/{namespace}/views",
    "GET /v1/{prefix}/namespaces/{namespace}/views/{view}",
    "HEAD /v1/{prefix}/namespaces/{namespace}/views/{view}",
    "POST /v1/{prefix}/namespaces/{namespace}/views/{view}",
    "DELETE /v1/{prefix}/namespaces/{namespace}/views/{view}",
    "POST /v1/{prefix}/views/rename",
)


@dataclass
class Views:
    store: ViewStore


VIEWS_KEY: web.AppKey[Views] = web.AppKey("emulator_views", Views)


def _not_found() -> ApiError:
    return ApiError(404, "NoSuchViewException", "View does not exist")


def _taken(request: web.Request, ns: Namespace, name: str) -> bool:
    """A table or a view has the name (one tabular per name)."""
    return (catalog_of(request).store.get(ns, name) is not None
            or state_of(request).store.get_table(ns, name) is not None
            or request.app[VIEWS_KEY].store.get(ns, name) is not None)


def _view_from_path(request: web.Request) -> tuple[Warehouse, Namespace, ViewRow]:
    wh = warehouse_from_prefix(request)
    ns = namespace_from_path(request, wh)
    view = request.app[VIEWS_KEY].store.get(ns, request.match_info["view"])
    if view is None:
        raise _not_found()
    return wh, ns, view


def _answer(wh: Warehouse, view: ViewRow) -> dict[str, Any]:
    return {"metadata-location": view.metadata_location,
            "metadata": json.loads(view.metadata_json),
            "config": load_config(wh.storage_profile, None)}


async def list_views(request: web.Request) -> web.Response:
    wh = warehouse_from_prefix(request)
    ns = namespace_from_path(request, wh)
    token = request.query.get("pageToken")
    rows = request.app[VIEWS_KEY].store.list(ns, decode_token(token) if token else None,
                                             clamp_page_size(query_page_size(request)))
    return web.json_response({"identifiers": [{"namespace": ns.parts, "name": v.name}
                                              for v in rows], **next_page(rows)})


async def create_view(request: web.Request) -> web.Response:
    wh = warehouse_from_prefix(request)
    ns = namespace_from_path(request, wh)
    body = await read_json(request, CreateView)
    if not body.name or "." in body.name:
        raise ApiError(400, "BadRequestException", "Invalid view name")
    if _taken(request, ns, body.name):
        raise ApiError(409, "AlreadyExistsException", "View or table already exists")
    view_id = str(uuid7())
    location = _location(wh, view_id, body.location)
    metadata = new_view_metadata(body, location, view_id)
    metadata_location = metadata_file(location, 0)
    cred = await _vend(request, wh, ns, view_id, body.name, location,
                       Permission.READ_WRITE_DELETE)
    await write_view_metadata(metadata, metadata_location, _io_props(wh, cred))
    try:
        view = request.app[VIEWS_KEY].store.create(
            view_id=view_id, ns=ns, name=body.name, location=location,
            metadata_location=metadata_location, metadata_json=json.dumps(json_of(metadata)))
    except ConflictError as exc:
        raise ApiError(409, "AlreadyExistsException", "View already exists") from exc
    await emit(request, "createView", tabular_type="View", tabular_id=view_id,
               warehouse_id=wh.id, name=body.name, namespace=ns.parts, join=DOT, prefix=None,
               data=body.model_dump(by_alias=True, mode="json"))
    return web.json_response(_answer(wh, view))


async def load_view(request: web.Request) -> web.Response:
    wh, _, view = _view_from_path(request)
    return web.json_response(_answer(wh, view))


async def view_exists(request: web.Request) -> web.Response:
    _view_from_path(request)
    return web.Response(status=204)


async def replace_view(request: web.Request) -> web.Response:
    wh, ns, view = _view_from_path(request)
    body = await read_json(request, CommitView)
    async with catalog_of(request).locks.hold(view.id):
        current = request.app[VIEWS_KEY].store.get(ns, view.name)
        if current is None:
            raise _not_found()
        try:
            metadata = apply_view_commit(ViewMetadata.model_validate_json(current.metadata_json),
                                         body)
        except LookupError as exc:
            raise ApiError(409, "CommitFailedException", f"Commit failed: {exc}") from exc
        except (ValueError, KeyError, TypeError) as exc:
            raise ApiError(400, "BadRequestException", f"Invalid update: {exc}") from exc
        version = int(current.metadata_location.rsplit("/", 1)[1].split("-", 1)[0]) + 1
        new_location = metadata_file(metadata.location, version)
        cred = await _vend(request, wh, ns, view.id, view.name, metadata.location,
                           Permission.READ_WRITE_DELETE)
        await write_view_metadata(metadata, new_location, _io_props(wh, cred))
        if not request.app[VIEWS_KEY].store.swap_metadata(
                view.id, current.metadata_location, new_location, json.dumps(json_of(metadata))):
            raise ApiError(409, "CommitFailedException", "View metadata changed concurrently")
    await emit(request, "updateView", tabular_type="View", tabular_id=str(metadata.view_uuid),
               warehouse_id=wh.id, name=view.name, namespace=ns.parts, join=DOT, prefix=None,
               data=body.model_dump(by_alias=True, mode="json"))
    updated = request.app[VIEWS_KEY].store.get(ns, view.name)
    assert updated is not None
    return web.json_response(_answer(wh, updated))


async def drop_view(request: web.Request) -> web.Response:
    wh, ns, view = _view_from_path(request)
    request.app[VIEWS_KEY].store.delete(view.id)
    await emit(request, "dropView", tabular_type="View", tabular_id=view.id,
               warehouse_id=wh.id, name=view.name, namespace=ns.parts, join=DOT, prefix=None)
    return web.Response(status=204)


async def rename_view(request: web.Request) -> web.Response:
    wh = warehouse_from_prefix(request)
    body = await read_json(request, RenameView)
    src, dst = body.source, body.destination
    for ident in (src, dst):
        validate_namespace(list(ident.namespace.root))
    src_ns = namespace_from_body(request, wh, list(src.namespace.root))
    store = request.app[VIEWS_KEY].store
    view = store.get(src_ns, src.name)
    if view is None:
        raise _not_found()
    dst_ns = namespace_from_body(request, wh, list(dst.namespace.root))
    if src_ns.id == dst_ns.id and src.name == dst.name:
        return web.Response(status=204)
    other = store.get(dst_ns, dst.name)
    if (other is not None and other.id != view.id) or (
            other is None and _taken(request, dst_ns, dst.name)):
        raise ApiError(409, "AlreadyExistsException", "View or table already exists")
    try:
        store.rename(view.id, dst_ns, dst.name)
    except ConflictError as exc:
        raise ApiError(409, "AlreadyExistsException", "View already exists") from exc
    await emit(request, "renameView", tabular_type="View", tabular_id=view.id,
               warehouse_id=wh.id, name=src.name, namespace=list(src.namespace.root), join=DOT,
               prefix="")
    return web.Response(status=204)


def namespace_has_views(request: web.Request, ns: Namespace) -> bool:
    """Whether a namespace holds views (a non-recursive drop must refuse it)."""
    return request.app[VIEWS_KEY].store.has_views(ns)


async def _close(app: web.Application) -> None:
    app[VIEWS_KEY].store.close()


def setup(app: web.Application, db_path: str) -> None:
    """Register the view routes and their store on the emulator app."""
    app[VIEWS_KEY] = Views(store=ViewStore(db_path))
    v = VIEWS + "/{view}"
    app.router.add_get(VIEWS, list_views, name="list_views", allow_head=False)
    app.router.add_post(VIEWS, create_view, name="create_view")
    app.router.add_get(v, load_view, name="load_view", allow_head=False)
    app.router.add_head(v, view_exists, name="view_exists")
    app.router.add_post(v, replace_view, name="replace_view")
    app.router.add_delete(v, drop_view, name="drop_view")
    app.router.add_post(RENAME, rename_view, name="rename_view")
    app.on_cleanup.append(_close)
