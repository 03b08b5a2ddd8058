"""The Generic Table API (`/lakekeeper/v1/{prefix}/...`), lakekeeper-api.md §2."""

from __future__ import annotations

import json
import uuid
from typing import Any

from aiohttp import web

from devstack.emulator.errors import ApiError, not_found_table
from devstack.emulator.models import GenericTable, Warehouse
from devstack.emulator.names import validate_format, validate_namespace, validate_table_name
from devstack.emulator.pagination import Cursor, clamp_page_size, decode_token, encode_token
from devstack.emulator.purge import schedule_purge
from devstack.emulator.state import (
    namespace_from_body,
    namespace_from_path,
    permission_of,
    query_bool,
    query_page_size,
    state_of,
    warehouse_from_prefix,
)
from devstack.emulator.store import ConflictError
from devstack.emulator.vending import credential_config, load_config
from devstack.emulator.wire import CreateGenericTable, RenameGenericTable, read_json

MAX_JSON_FIELD_BYTES = 1024 * 1024
DELEGATION_HEADER = "X-Iceberg-Access-Delegation"
BASE = "/lakekeeper/v1/{prefix}"
TABLES = BASE + "/namespaces/{namespace}/generic-tables"


def table_json(t: GenericTable) -> dict[str, Any]:
    """`GenericTableData`: optional fields omitted when null/empty."""
    out: dict[str, Any] = {
        "name": t.name,
        "format": t.format,
        "base-location": t.base_location,
        "protected": t.protected,
    }
    if t.doc is not None:
        out["doc"] = t.doc
    if t.properties:
        out["properties"] = t.properties
    if t.schema is not None:
        out["schema"] = t.schema
    if t.statistics is not None:
        out["statistics"] = t.statistics
    return out


def _delegation(request: web.Request) -> set[str]:
    raw = ",".join(request.headers.getall(DELEGATION_HEADER, []))
    return {v.strip() for v in raw.split(",") if v.strip()}


def _json_size(value: Any) -> int:
    return len(json.dumps(value, separators=(",", ":")))


async def create_generic_table(request: web.Request) -> web.Response:
    st = state_of(request)
    wh = warehouse_from_prefix(request)
    ns = namespace_from_path(request, wh)
    body = await read_json(request, CreateGenericTable)
    validate_table_name(body.name)
    fmt = validate_format(body.format)
    for field, value in (("schema", body.schema_), ("statistics", body.statistics)):
        if value is not None and _json_size(value) > MAX_JSON_FIELD_BYTES:
            raise ApiError(400, "PayloadTooLarge", f"Generic table {field} exceeds 1 MiB")
    if st.store.get_table(ns, body.name) is not None:
        raise ApiError(409, "GenericTableAlreadyExists", "Generic table already exists")
    table_id = str(uuid.uuid4())
    location = _location(wh, ns.id, table_id, body.base_location)
    if st.store.location_taken(wh.id, location):
        raise ApiError(
            409, "LocationAlreadyTaken", "Location is already taken by another table or view"
        )
    try:
        table = st.store.create_table(
            table_id=table_id,
            ns=ns,
            name=body.name,
            fmt=fmt,
            base_location=location,
            doc=body.doc,
            properties=body.properties or {},
            schema=body.schema_,
            statistics=body.statistics,
        )
    except ConflictError as exc:
        raise ApiError(409, "GenericTableAlreadyExists", "Generic table already exists") from exc
    return web.json_response({"table": table_json(table)})


def _location(wh: Warehouse, namespace_id: str, table_id: str, requested: str | None) -> str:
    base = wh.base_location
    if requested is None or requested.strip() == "":
        return f"{base}/{wh.id}/{namespace_id}/{table_id}"
    location = requested.strip().rstrip("/")
    if not location.startswith(base + "/"):
        raise ApiError(
            400,
            "InvalidLocation",
            f"Location '{location}' is not a sub-location of the warehouse location '{base}'",
        )
    return location


async def list_generic_tables(request: web.Request) -> web.Response:
    st = state_of(request)
    wh = warehouse_from_prefix(request)
    ns = namespace_from_path(request, wh)
    size = clamp_page_size(query_page_size(request))
    token = request.query.get("pageToken")
    after = decode_token(token) if token else None
    rows = st.store.list_tables(ns, after, size)
    out: dict[str, Any] = {
        "identifiers": [
            {"namespace": ns.parts, "name": t.name, "format": t.format, "id": t.id} for t in rows
        ]
    }
    # Lakekeeper emits a token whenever the page had a row, even on the last page.
    if rows:
        out["next-page-token"] = encode_token(Cursor(rows[-1].created_at_us, rows[-1].id))
    return web.json_response(out)


def _table_from_path(request: web.Request) -> tuple[Warehouse, GenericTable]:
    st = state_of(request)
    wh = warehouse_from_prefix(request)
    ns = namespace_from_path(request, wh)
    table = st.store.get_table(ns, request.match_info["table"])
    if table is None:
        raise not_found_table()
    return wh, table


async def load_generic_table(request: web.Request) -> web.Response:
    wh, table = _table_from_path(request)
    modes = _delegation(request)
    profile = wh.storage_profile
    out: dict[str, Any] = {"table": table_json(table)}
    vend = bool(profile.get("sts-enabled")) and modes != {"client-managed"}
    if modes and "vended-credentials" not in modes:
        vend = False  # remote-signing only (not emulated) or client-managed: no credentials
    if vend:
        cred = await state_of(request).vendor.vend(wh, table, permission_of(request))
        out["config"] = load_config(profile, cred)
        out["storage-credentials"] = [
            {"prefix": table.base_location, "config": credential_config(profile, cred)}
        ]
    else:
        out["config"] = load_config(profile, None)
    return web.json_response(out)


async def load_generic_table_credentials(request: web.Request) -> web.Response:
    wh, table = _table_from_path(request)
    modes = _delegation(request) - {"client-managed"}
    profile = wh.storage_profile
    if not profile.get("sts-enabled") or (modes and "vended-credentials" not in modes):
        return web.json_response({"storage-credentials": []})
    cred = await state_of(request).vendor.vend(wh, table, permission_of(request))
    return web.json_response(
        {
            "storage-credentials": [
                {"prefix": table.base_location, "config": credential_config(profile, cred)}
            ]
        }
    )


async def drop_generic_table(request: web.Request) -> web.Response:
    st = state_of(request)
    wh, table = _table_from_path(request)
    purge = query_bool(request, "purgeRequested", True)
    force = query_bool(request, "force", False)
    if table.protected and not force:
        raise ApiError(
            409,
            "ProtectedTabularDeletionWithoutForce",
            "Generic table is protected and force is not set",
        )
    if wh.soft_delete and not force:
        expiration = int(wh.delete_profile.get("expiration-seconds", 604800))
        st.store.soft_delete_table(table.id, expiration)
    else:
        st.store.hard_delete_table(table.id)
        if purge:
            schedule_purge(request.app, wh, table)
    return web.Response(status=204)


async def rename_generic_table(request: web.Request) -> web.Response:
    st = state_of(request)
    wh = warehouse_from_prefix(request)
    body = await read_json(request, RenameGenericTable)
    src, dst = body.source, body.destination
    for ident, kind in ((src, "InvalidSourceIdent"), (dst, "InvalidDestinationIdent")):
        try:
            validate_namespace(ident.namespace)
        except ApiError as exc:
            raise ApiError(400, kind, exc.message) from exc
        if ident.name == "":
            raise ApiError(400, "IdentifierNameEmpty", "Identifier name must not be empty")
    if src.namespace == dst.namespace and src.name == dst.name:
        return web.Response(status=204)
    src_ns = namespace_from_body(request, wh, src.namespace)
    table = st.store.get_table(src_ns, src.name)
    if table is None:
        raise not_found_table()
    dst_ns = namespace_from_body(request, wh, dst.namespace)
    validate_table_name(dst.name)
    existing = st.store.get_table(dst_ns, dst.name)
    if existing is not None and existing.id != table.id:
        raise ApiError(409, "AlreadyExistsException", "Generic table already exists")
    try:
        st.store.rename_table(table.id, dst_ns, dst.name)
    except ConflictError as exc:
        raise ApiError(409, "AlreadyExistsException", "Generic table already exists") from exc
    return web.Response(status=204)


def add_routes(app: web.Application) -> None:
    app.router.add_post(TABLES, create_generic_table, name="create_generic_table")
    app.router.add_get(TABLES, list_generic_tables, name="list_generic_tables", allow_head=False)
    app.router.add_get(
        TABLES + "/{table}", load_generic_table, name="load_generic_table", allow_head=False
    )
    app.router.add_delete(TABLES + "/{table}", drop_generic_table, name="drop_generic_table")
    app.router.add_get(
        TABLES + "/{table}/credentials",
        load_generic_table_credentials,
        name="load_generic_table_credentials",
        allow_head=False,
    )
    app.router.add_post(
        BASE + "/generic-tables/rename", rename_generic_table, name="rename_generic_table"
    )
