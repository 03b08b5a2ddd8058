"""The Generic Table API (`/lakekeeper/v1/{prefix}/...`; upstream spec:
docs/docs/api/generic-table-open-api.yaml in https://github.com/lakekeeper/lakekeeper)."""

from __future__ import annotations

import json
from typing import Any

from aiohttp import web

from devstack.emulator.cloud_vending import vending_enabled
from devstack.emulator.errors import ApiError, not_found_table, uuid7
from devstack.emulator.events import DOT, UNIT
from devstack.emulator.models import GenericTable, Warehouse
from devstack.emulator.names import (
    decode_namespace_segment,
    validate_format,
    validate_namespace,
    validate_table_name,
)
from devstack.emulator.pagination import clamp_page_size, decode_token, next_page
from devstack.emulator.publish import emit
from devstack.emulator.purge import schedule_purge
from devstack.emulator.state import (
    REPLAY_KEY,
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


def delegation_values(request: web.Request) -> set[str]:
    """Every `X-Iceberg-Access-Delegation` line merged, split on commas, trimmed."""
    return {
        v.strip() for line in request.headers.getall(DELEGATION_HEADER, []) for v in line.split(",")
    }


def client_managed(request: web.Request) -> bool:
    """Lakekeeper's `parse_data_access` (`api/iceberg/v1/tables.rs`).

    All header lines are merged and split on commas; values match exactly after trimming, so
    unknown or differently cased values are ignored and the server chooses (it vends). Only
    `client-managed` without `vended-credentials` or `remote-signing` turns vending off.
    Generic tables do not sign here (Iceberg tables do: routes_signer.py), so `remote-signing`
    alone falls back to vending on them.
    """
    values = delegation_values(request)
    return "client-managed" in values and not values & {"vended-credentials", "remote-signing"}


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
    if request.get(REPLAY_KEY):
        # Lakekeeper (`generic_tables/create.rs`): a replay loads the table, client-managed.
        table = st.store.get_table(ns, body.name)
        if table is None:
            raise not_found_table()
        return web.json_response(
            {"table": table_json(table), "config": load_config(wh.storage_profile, None)}
        )
    table_id = str(uuid7())
    location = _location(wh, table_id, body.base_location)
    # Lakekeeper checks the location before the INSERT that trips the unique name constraint
    # (`ensure_location_available`, lakekeeper-storage-postgres `tabular/mod.rs`).
    if st.store.location_taken(wh.id, location):
        raise ApiError(
            409, "LocationAlreadyTaken", "Location is already taken by another table or view"
        )
    if st.store.get_table(ns, body.name) is not None:
        raise ApiError(409, "GenericTableAlreadyExists", "Generic table already exists")
    st.faults.replica.wrote(st.faults.replica.key("generic", ns.id, body.name), None)
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
    # `data` is the request as sent (the resolved location is not in it), properties omitted
    # when empty, as Lakekeeper's CreateGenericTableRequest serializes.
    data = body.model_dump(by_alias=True, exclude_none=True, mode="json")
    if not data.get("properties"):
        data.pop("properties", None)
    await emit(request, "createGenericTable", tabular_type="GenericTable", tabular_id=table.id,
               warehouse_id=wh.id, name=table.name, namespace=ns.parts, join=DOT, prefix=None,
               data=data)
    return web.json_response({"table": table_json(table)})


def _location(wh: Warehouse, table_id: str, requested: str | None) -> str:
    """Lakekeeper 0.13's default (flat) storage layout: `<base>/<table uuid>`."""
    base = wh.base_location
    if requested is None or requested.strip() == "":
        return f"{base}/{table_id}"
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
    # `generic_tables/list.rs` echoes the request path's namespace, not the stored case.
    requested = decode_namespace_segment(request.match_info["namespace"])
    identifiers = [
        {"namespace": requested, "name": t.name, "format": t.format, "id": t.id} for t in rows
    ]
    return web.json_response({"identifiers": identifiers, **next_page(rows)})


def _table_from_path(request: web.Request, *, replica: bool = False
                     ) -> tuple[Warehouse, GenericTable]:
    """The table the path names; `replica`: as the read pool sees it (the replica-lag fault)."""
    st = state_of(request)
    wh = warehouse_from_prefix(request)
    ns = namespace_from_path(request, wh)
    name = request.match_info["table"]
    table = st.store.get_table(ns, name)
    if replica:
        table = st.faults.replica.read(st.faults.replica.key("generic", ns.id, name), table)
    if table is None:
        raise not_found_table()
    return wh, table


async def load_generic_table(request: web.Request) -> web.Response:
    wh, table = _table_from_path(request, replica=True)
    profile = wh.storage_profile
    out: dict[str, Any] = {"table": table_json(table)}
    # `config` always carries the region/endpoint keys; `storage-credentials` only a real one.
    if vending_enabled(profile) and not client_managed(request):
        cred = await state_of(request).vendor.vend(wh, table, permission_of(request))
        out["config"] = load_config(profile, cred)
        out["storage-credentials"] = [
            {"prefix": table.base_location, "config": credential_config(profile, cred)}
        ]
    else:
        # A load that vends nothing (a gateway's identity re-check): counted apart, so a bench
        # can tell metadata loads from credential calls.
        state_of(request).stats.incr("load_generic_table_unvended")
        out["config"] = load_config(profile, None)
    return web.json_response(out)


async def load_generic_table_credentials(request: web.Request) -> web.Response:
    wh, table = _table_from_path(request, replica=True)
    profile = wh.storage_profile
    # Lakekeeper maps `client-managed` to "not specified" here, so the server chooses: it vends.
    if not vending_enabled(profile):
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
    ns = namespace_from_path(request, wh)
    st.faults.replica.wrote(st.faults.replica.key("generic", ns.id, table.name), table)
    if wh.soft_delete and not force:
        expiration = int(wh.delete_profile.get("expiration-seconds", 604800))
        st.store.soft_delete_table(table.id, expiration)
    else:
        st.store.hard_delete_table(table.id)
        if purge:
            schedule_purge(request.app, wh, table)
    await emit(request, "dropGenericTable", tabular_type="GenericTable", tabular_id=table.id,
               warehouse_id=wh.id, name=table.name, namespace=ns.parts, join=DOT, prefix=None)
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
    # Lakekeeper (`generic_tables/rename.rs`) resolves the source namespace and table and the
    # destination namespace before the same-name no-op: a missing source is 404 even then.
    src_ns = namespace_from_body(request, wh, src.namespace)
    table = st.store.get_table(src_ns, src.name)
    if table is None:
        raise not_found_table()
    dst_ns = namespace_from_body(request, wh, dst.namespace)
    if src.namespace == dst.namespace and src.name == dst.name:
        return web.Response(status=204)
    validate_table_name(dst.name)
    existing = st.store.get_table(dst_ns, dst.name)
    if existing is not None and existing.id != table.id:
        raise ApiError(409, "AlreadyExistsException", "Generic table already exists")
    replica = st.faults.replica
    replica.wrote(replica.key("generic", src_ns.id, table.name), table)
    replica.wrote(replica.key("generic", dst_ns.id, dst.name), existing)
    try:
        st.store.rename_table(table.id, dst_ns, dst.name)
    except ConflictError as exc:
        raise ApiError(409, "AlreadyExistsException", "Generic table already exists") from exc
    await emit(request, "renameGenericTable", tabular_type="GenericTable", tabular_id=table.id,
               warehouse_id=wh.id, name=table.name, namespace=src_ns.parts, join=UNIT,
               prefix=None, data={"source": {"namespace": src.namespace, "name": src.name},
                                  "destination": {"namespace": dst.namespace, "name": dst.name}})
    return web.Response(status=204)


def add_routes(app: web.Application) -> None:
    app.router.add_post(TABLES, create_generic_table, name="create_generic_table")
    app.router.add_get(TABLES, list_generic_tables, name="list_generic_tables")
    app.router.add_get(TABLES + "/{table}", load_generic_table, name="load_generic_table")
    app.router.add_delete(TABLES + "/{table}", drop_generic_table, name="drop_generic_table")
    app.router.add_get(
        TABLES + "/{table}/credentials",
        load_generic_table_credentials,
        name="load_generic_table_credentials",
    )
    app.router.add_post(
        BASE + "/generic-tables/rename", rename_generic_table, name="rename_generic_table"
    )
