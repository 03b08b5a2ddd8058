"""Management routes needed by the stack: bootstrap, warehouses, whoami, protection, undrop
(Lakekeeper's management-open-api.yaml, docs/docs/api/ in https://github.com/lakekeeper/lakekeeper)."""

from __future__ import annotations

import datetime as dt
import uuid
from typing import Any

from aiohttp import web

from devstack.emulator.errors import ApiError, not_found_table
from devstack.emulator.events import UNIT
from devstack.emulator.models import GenericTable, Warehouse
from devstack.emulator.pagination import clamp_page_size, decode_token, next_page
from devstack.emulator.publish import emit
from devstack.emulator.state import (
    principal_of,
    project_of,
    query_page_size,
    state_of,
    warehouse_from_path,
)
from devstack.emulator.store import ConflictError
from devstack.emulator.wire import Bootstrap, CreateWarehouse, SetProtection, Undrop, read_json

M = "/management/v1"
WH = M + "/warehouse/{warehouse_id}"


def _iso(us: int | None) -> str | None:
    if us is None:
        return None
    stamp = dt.datetime.fromtimestamp(us / 1e6, tz=dt.UTC)
    return stamp.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def warehouse_json(wh: Warehouse) -> dict[str, Any]:
    """`GetWarehouseResponse` (the storage credential is never returned)."""
    return {
        "warehouse-id": wh.id,
        "id": wh.id,
        "name": wh.name,
        "project-id": wh.project_id,
        "status": wh.status,
        "storage-profile": wh.storage_profile,
        "delete-profile": wh.delete_profile,
        "protected": wh.protected,
    }


async def bootstrap(request: web.Request) -> web.Response:
    body = await read_json(request, Bootstrap)
    if not body.accept_terms_of_use:
        raise ApiError(400, "TermsOfUseNotAccepted", "You must accept the terms of use")
    if not state_of(request).store.bootstrap():
        raise ApiError(400, "CatalogAlreadyBootstrapped", "Catalog already bootstrapped")
    return web.Response(status=204)


# Required fields per storage family (Lakekeeper's S3Profile, AdlsProfile, GcsProfile) and the
# name of each one's validity field.
_PROFILE_FIELDS = {
    "s3": (("bucket", "region", "sts-enabled"), "sts-token-validity-seconds"),
    "adls": (("filesystem", "account-name"), "sas-token-validity-seconds"),
    "gcs": (("bucket",), None),
}


def _validated_profile(profile: dict[str, Any]) -> dict[str, Any]:
    kind = profile.get("type")
    if kind not in _PROFILE_FIELDS:
        raise ApiError(
            400, "InvalidStorageProfile", "Only s3, adls and gcs storage profiles are emulated"
        )
    required, validity_field = _PROFILE_FIELDS[str(kind)]
    for field in required:
        if field not in profile:
            raise ApiError(422, "InvalidStorageProfile", f"missing field `{field}`")
    if validity_field is not None:
        validity = profile.get(validity_field, 3600)
        if not isinstance(validity, int) or isinstance(validity, bool) or validity < 0:
            raise ApiError(422, "InvalidStorageProfile", f"{validity_field} must be a JSON integer")
        if kind == "s3":
            profile.setdefault(validity_field, 3600)
    return profile


async def create_warehouse(request: web.Request) -> web.Response:
    st = state_of(request)
    body = await read_json(request, CreateWarehouse)
    if not body.warehouse_name.strip():
        raise ApiError(400, "InvalidWarehouseName", "Warehouse name must not be empty")
    profile = _validated_profile(dict(body.storage_profile))
    delete_profile = body.delete_profile or {"type": "hard"}
    if delete_profile.get("type") not in ("hard", "soft"):
        raise ApiError(400, "InvalidDeleteProfile", "delete-profile type must be hard or soft")
    project = body.project_id or project_of(request)
    try:
        project = str(uuid.UUID(project))
    except ValueError as exc:
        raise ApiError(400, "InvalidProjectId", "project-id must be a UUID") from exc
    try:
        wh = st.store.create_warehouse(
            project_id=project,
            name=body.warehouse_name,
            storage_profile=profile,
            storage_credential=body.storage_credential,
            delete_profile=delete_profile,
        )
    except ConflictError as exc:
        raise ApiError(409, "WarehouseAlreadyExists", "Warehouse already exists") from exc
    return web.json_response(warehouse_json(wh), status=201)


async def list_warehouses(request: web.Request) -> web.Response:
    whs = state_of(request).store.list_warehouses(project_of(request))
    return web.json_response({"warehouses": [warehouse_json(w) for w in whs]})


def _warehouse_param(request: web.Request) -> Warehouse:
    # The management API does not echo the bad id, unlike the catalog's `{prefix}`.
    return warehouse_from_path(request, "warehouse_id", "Provided warehouse id is not a valid UUID")


async def get_warehouse(request: web.Request) -> web.Response:
    return web.json_response(warehouse_json(_warehouse_param(request)))


async def whoami(request: web.Request) -> web.Response:
    p = principal_of(request)
    return web.json_response(
        {"id": p.user_id, "name": p.subject, "user-type": "application", "email": None}
    )


def _table_param(request: web.Request) -> tuple[Warehouse, GenericTable]:
    wh = _warehouse_param(request)
    table = state_of(request).store.get_table_by_id(request.match_info["table_id"])
    if table is None or table.warehouse_id != wh.id or table.deleted_at_us is not None:
        raise not_found_table()
    return wh, table


async def get_protection(request: web.Request) -> web.Response:
    _, table = _table_param(request)
    return web.json_response(
        {"protected": table.protected, "updated_at": _iso(table.protected_updated_at_us)}
    )


async def set_protection(request: web.Request) -> web.Response:
    _, table = _table_param(request)
    body = await read_json(request, SetProtection)
    updated = state_of(request).store.set_protection(table.id, body.protected)
    return web.json_response({"protected": body.protected, "updated_at": _iso(updated)})


async def list_deleted_tabulars(request: web.Request) -> web.Response:
    st = state_of(request)
    wh = _warehouse_param(request)
    size = clamp_page_size(query_page_size(request))
    token = request.query.get("pageToken")
    after = decode_token(token) if token else None
    rows = st.store.list_deleted(wh.id, request.query.get("namespaceId"), after, size)
    tabulars = []
    for t in rows:
        ns = st.store.get_namespace_by_id(t.namespace_id)
        tabulars.append(
            {
                "id": t.id,
                "name": t.name,
                "namespace": ns.parts if ns else [],
                "typ": "generic-table",
                "warehouse-id": wh.id,
                "created-at": _iso(t.created_at_us),
                "deleted-at": _iso(t.deleted_at_us),
                "expiration-date": _iso(t.expiration_at_us),
            }
        )
    return web.json_response({"tabulars": tabulars, **next_page(rows)})


async def undrop_tabulars(request: web.Request) -> web.Response:
    st = state_of(request)
    wh = _warehouse_param(request)
    body = await read_json(request, Undrop)
    restored: list[GenericTable] = []
    for target in body.targets:
        table = st.store.get_table_by_id(target.id)
        if table is None or table.warehouse_id != wh.id or table.deleted_at_us is None:
            raise not_found_table()
        try:
            st.store.undrop_table(table.id)
        except ConflictError as exc:
            raise ApiError(
                409, "GenericTableAlreadyExists", "Generic table already exists"
            ) from exc
        restored.append(table)
    # One undropTabulars event per restored tabular (U+001F join, empty prefix, no data).
    for i, table in enumerate(restored):
        ns = st.store.get_namespace_by_id(table.namespace_id)
        await emit(request, "undropTabulars", tabular_type="GenericTable", tabular_id=table.id,
                   warehouse_id=wh.id, name=table.name, namespace=ns.parts if ns else [],
                   join=UNIT, prefix="", num_events=len(restored), sequence_number=i)
    return web.Response(status=204)


def add_routes(app: web.Application) -> None:
    app.router.add_post(M + "/bootstrap", bootstrap, name="bootstrap")
    app.router.add_post(M + "/warehouse", create_warehouse, name="create_warehouse")
    app.router.add_get(M + "/warehouse", list_warehouses, name="list_warehouses")
    app.router.add_get(WH, get_warehouse, name="get_warehouse")
    app.router.add_get(M + "/whoami", whoami, name="whoami")
    prot = WH + "/generic-table/{table_id}/protection"
    app.router.add_get(prot, get_protection, name="get_protection")
    app.router.add_post(prot, set_protection, name="set_protection")
    app.router.add_get(
        WH + "/deleted-tabulars",
        list_deleted_tabulars,
        name="list_deleted_tabulars",
    )
    app.router.add_post(WH + "/deleted-tabulars/undrop", undrop_tabulars, name="undrop_tabulars")
