"""Iceberg REST table routes (`/catalog/v1/{prefix}/...`), as Lakekeeper serves them.

Create, list, load (with `X-Iceberg-Access-Delegation` vending), exists, commit (requirements
and updates, pyiceberg's semantics via `iceberg_meta`), drop, rename, register and the
credential refresh endpoint. Vended credentials come from the same STS vending and STC cache as
generic tables, scoped to the table location; the S3 credential maps also carry Lakekeeper's
`client.refresh-credentials-endpoint`. Metadata files are really written to storage.

Deviations: ETag/304 on client-managed loads only (a weak `lk2.` tag over warehouse and
metadata location), remote signing in routes_signer.py (views: routes_views.py; multi-table commits:
routes_transactions.py); Iceberg tables are always hard-deleted (soft-delete warehouses too)
and never purged by a recursive namespace drop (their rows are dropped, their files kept).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from aiohttp import web
from pyiceberg.exceptions import CommitFailedException
from pyiceberg.table import TableIdentifier
from pyiceberg.table.update import AssertCreate

from devstack.emulator.errors import ApiError, uuid7
from devstack.emulator.events import DOT, UNIT
from devstack.emulator.iceberg_meta import (
    CommitIcebergTable,
    CreateIcebergTable,
    RegisterIcebergTable,
    RenameIcebergTable,
    TableLocks,
    apply_commit,
    create_metadata,
    dump_metadata,
    metadata_dict,
    metadata_file_location,
    parse_metadata,
    read_metadata,
    write_metadata,
)
from devstack.emulator.iceberg_store import IcebergStore, IcebergTable
from devstack.emulator.models import GenericTable, Namespace, Warehouse
from devstack.emulator.names import (
    NAMESPACE_SEPARATOR,
    decode_namespace_segment,
    validate_namespace,
)
from devstack.emulator.pagination import clamp_page_size, decode_token, next_page
from devstack.emulator.policy import Permission
from devstack.emulator.publish import emit
from devstack.emulator.purge import schedule_purge
from devstack.emulator.routes_tables import client_managed, delegation_values
from devstack.emulator.signer import select_delegation, signer_config
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
from devstack.emulator.vending import TemporaryCredential, credential_config, load_config
from devstack.emulator.wire import read_json

TABLES = "/catalog/v1/{prefix}/namespaces/{namespace}/tables"
RENAME = "/catalog/v1/{prefix}/tables/rename"
REGISTER = "/catalog/v1/{prefix}/namespaces/{namespace}/register"
ENDPOINTS = (
    "GET /v1/{prefix}/namespaces/{namespace}/tables",
    "POST /v1/{prefix}/namespaces/{namespace}/tables",
    "GET /v1/{prefix}/namespaces/{namespace}/tables/{table}",
    "HEAD /v1/{prefix}/namespaces/{namespace}/tables/{table}",
    "POST /v1/{prefix}/namespaces/{namespace}/tables/{table}",
    "DELETE /v1/{prefix}/namespaces/{namespace}/tables/{table}",
    "POST /v1/{prefix}/tables/rename",
    "POST /v1/{prefix}/namespaces/{namespace}/register",
    "GET /v1/{prefix}/namespaces/{namespace}/tables/{table}/credentials",
)


@dataclass
class IcebergCatalog:
    store: IcebergStore
    locks: TableLocks


ICEBERG: web.AppKey[IcebergCatalog] = web.AppKey("emulator_iceberg", IcebergCatalog)


def _not_found() -> ApiError:
    return ApiError(404, "NoSuchTableException", "Table does not exist")


def _already_exists() -> ApiError:
    return ApiError(409, "AlreadyExistsException", "Table already exists")


def _validate_name(name: str) -> None:
    if name == "":
        raise ApiError(400, "InvalidName", "Table name must not be empty")


def _as_tabular(table_id: str, ns: Namespace, name: str, location: str) -> GenericTable:
    """The vendor and purge take a tabular record; they read only its id and location."""
    return GenericTable(
        id=table_id, warehouse_id=ns.warehouse_id, namespace_id=ns.id, name=name,
        format="iceberg", base_location=location, doc=None, properties={}, schema=None,
        statistics=None, protected=False, protected_updated_at_us=None, created_at_us=0,
        deleted_at_us=None, expiration_at_us=None,
    )  # fmt: skip


def _pct(value: str) -> str:
    """Lakekeeper percent-encodes every non-alphanumeric character of the path parts."""
    return "".join(c if c.isascii() and c.isalnum() else quote(c, safe="") for c in value)


def _refresh_endpoint(request: web.Request, wh: Warehouse, ns: Namespace, name: str) -> str:
    base = f"{request.scheme}://{request.host}"
    ns_seg = _pct(NAMESPACE_SEPARATOR.join(ns.parts))
    return f"{base}/catalog/v1/{wh.id}/namespaces/{ns_seg}/tables/{_pct(name)}/credentials"


def _storage_credentials(
    request: web.Request, wh: Warehouse, ns: Namespace, name: str, location: str,
    cred: TemporaryCredential,
) -> list[dict[str, Any]]:  # fmt: skip
    config = credential_config(wh.storage_profile, cred)
    config["client.refresh-credentials-endpoint"] = _refresh_endpoint(request, wh, ns, name)
    return [{"prefix": location, "config": config}]


async def _vend(
    request: web.Request, wh: Warehouse, ns: Namespace, table_id: str, name: str, location: str,
    permission: Permission,
) -> TemporaryCredential:  # fmt: skip
    tabular = _as_tabular(table_id, ns, name, location)
    return await state_of(request).vendor.vend(wh, tabular, permission)


def _io_props(wh: Warehouse, cred: TemporaryCredential) -> dict[str, str]:
    props = credential_config(wh.storage_profile, cred)
    if not props.get("s3.session-token"):  # the warehouse's own static key
        props.pop("s3.session-token", None)
    return props


async def _catalog_cred(
    request: web.Request, wh: Warehouse, ns: Namespace, table_id: str, name: str, location: str,
    permission: Permission,
) -> TemporaryCredential:  # fmt: skip
    """The catalog's own storage access for metadata files: a vended credential on an STS
    warehouse, else the warehouse's storage key itself (as Lakekeeper always uses it)."""
    if wh.storage_profile.get("sts-enabled"):
        return await _vend(request, wh, ns, table_id, name, location, permission)
    cred = wh.storage_credential or {}
    ak = cred.get("access-key-id") or cred.get("aws-access-key-id")
    sk = cred.get("secret-access-key") or cred.get("aws-secret-access-key")
    if not ak or not sk:
        raise ApiError(400, "Misconfiguration", "Warehouse has no access-key storage credential")
    return TemporaryCredential(str(ak), str(sk), "", 0)


async def _table_response(
    request: web.Request, wh: Warehouse, ns: Namespace, table: IcebergTable, *, vend: bool
) -> dict[str, Any]:
    """`LoadTableResult`: metadata plus `config`/`storage-credentials` when vending."""
    profile = wh.storage_profile
    out: dict[str, Any] = {
        "metadata-location": table.metadata_location,
        "metadata": metadata_dict(parse_metadata(table.metadata_json)),
    }
    vend_keys, signs = select_delegation(delegation_values(request), profile) if vend \
        else (False, False)
    if vend_keys and profile.get("sts-enabled"):
        cred = await _vend(
            request, wh, ns, table.id, table.name, table.location, permission_of(request)
        )
        out["config"] = load_config(profile, cred)
        out["storage-credentials"] = _storage_credentials(
            request, wh, ns, table.name, table.location, cred
        )
    else:
        out["config"] = load_config(profile, None)
    if signs:
        out["config"].update(signer_config(f"{request.scheme}://{request.host}", wh.id, table.id))
    return out


def catalog_of(request: web.Request) -> IcebergCatalog:
    return request.app[ICEBERG]


def _table_from_path(request: web.Request, *, replica: bool = False
                     ) -> tuple[Warehouse, Namespace, IcebergTable]:
    """The table the path names; `replica`: as the read pool sees it (the replica-lag fault).

    Lakekeeper resolves a table by its whole identifier, so a table under a namespace that does
    not exist is a `NoSuchTableException` too, never `NoSuchNamespaceException`: Iceberg Java
    relies on that to read metadata tables (`ns.t.snapshots` is first tried as table
    `snapshots` in namespace `ns.t`, and only a missing *table* makes it try `ns.t`)."""
    wh = warehouse_from_prefix(request)
    try:
        ns = namespace_from_path(request, wh)
    except ApiError as exc:
        if exc.status == 404:
            raise _not_found() from None
        raise
    name = request.match_info["table"].replace("+", " ")
    table = catalog_of(request).store.get(ns, name)
    if replica:
        lag = state_of(request).faults.replica
        table = lag.read(lag.key("iceberg", ns.id, name), table)
    if table is None:
        raise _not_found()
    return wh, ns, table


def _location(wh: Warehouse, table_id: str, requested: str | None) -> str:
    base = wh.base_location
    if requested is None or requested.strip() == "":
        return f"{base}/{table_id}"
    location = requested.strip().rstrip("/")
    if not location.startswith(base + "/"):
        raise ApiError(
            400, "InvalidLocation", "Table location is not inside the warehouse location"
        )
    return location


async def list_tables(request: web.Request) -> web.Response:
    wh = warehouse_from_prefix(request)
    ns = namespace_from_path(request, wh)
    size = clamp_page_size(query_page_size(request))
    token = request.query.get("pageToken")
    after = decode_token(token) if token else None
    rows = catalog_of(request).store.list(ns, after, size)
    identifiers = [{"namespace": ns.parts, "name": t.name} for t in rows]
    return web.json_response({"identifiers": identifiers, **next_page(rows)})


async def create_table(request: web.Request) -> web.Response:
    st = state_of(request)
    cat = catalog_of(request)
    wh = warehouse_from_prefix(request)
    ns = namespace_from_path(request, wh)
    body = await read_json(request, CreateIcebergTable)
    _validate_name(body.name)
    if cat.store.get(ns, body.name) is not None or st.store.get_table(ns, body.name) is not None:
        raise _already_exists()
    table_id = str(uuid7())
    location = _location(wh, table_id, body.location)
    if cat.store.location_taken(wh.id, location) or st.store.location_taken(wh.id, location):
        raise ApiError(409, "LocationAlreadyTaken", "Location is already taken by another table")
    try:
        metadata = create_metadata(body, location, table_id)
    except ValueError as exc:
        raise ApiError(400, "BadRequestException", f"Invalid table metadata: {exc}") from exc
    # The catalog's own storage access (Lakekeeper writes metadata with its storage credential;
    # the emulator with a vended one), whether or not the warehouse vends to clients.
    cred = await _catalog_cred(request, wh, ns, table_id, body.name, location,
                               Permission.READ_WRITE_DELETE)
    out: dict[str, Any] = {"metadata": metadata_dict(metadata)}
    if not body.stage_create:
        metadata_location = metadata_file_location(metadata, 0)
        await write_metadata(metadata, metadata_location, _io_props(wh, cred))
        st.faults.replica.wrote(st.faults.replica.key("iceberg", ns.id, body.name), None)
        try:
            cat.store.create(
                table_id=table_id, ns=ns, name=body.name, location=location,
                metadata_location=metadata_location, metadata_json=dump_metadata(metadata),
            )  # fmt: skip
        except ConflictError as exc:
            raise _already_exists() from exc
        out["metadata-location"] = metadata_location
    # Lakekeeper's createTable event: the CreateTableRequest with the location filled in.
    data = {**body.model_dump(by_alias=True, mode="json"), "location": location}
    await emit(request, "createTable", tabular_type="Table", tabular_id=table_id,
               warehouse_id=wh.id, name=body.name, namespace=ns.parts, join=DOT, prefix=None,
               data=data)
    profile = wh.storage_profile
    vend_keys, signs = (False, False) if client_managed(request) \
        else select_delegation(delegation_values(request), profile)
    if vend_keys and profile.get("sts-enabled"):
        user_cred = cred
        if permission_of(request) is not Permission.READ_WRITE_DELETE:
            user_cred = await _vend(
                request, wh, ns, table_id, body.name, location, permission_of(request)
            )
        out["config"] = load_config(profile, user_cred)
        out["storage-credentials"] = _storage_credentials(
            request, wh, ns, body.name, location, user_cred
        )
    else:
        out["config"] = load_config(profile, None)
    if signs:
        out["config"].update(signer_config(f"{request.scheme}://{request.host}", wh.id, table_id))
    return web.json_response(out)


def _etag(wh: Warehouse, table: IcebergTable) -> str:
    """A weak `lk2.` tag over what Lakekeeper's covers here (warehouse, metadata location)."""
    digest = hashlib.sha256(f"{wh.id}\x00{table.metadata_location}".encode()).hexdigest()
    return f'W/"lk2.{digest[:16]}"'


async def load_table(request: web.Request) -> web.Response:
    wh, ns, table = _table_from_path(request, replica=True)
    vend = not client_managed(request)
    if not vend:  # no expiring credential in the answer: Lakekeeper may answer 304
        etag = _etag(wh, table)
        if request.headers.get("If-None-Match") in (etag, "*"):
            state_of(request).stats.incr("load_table_not_modified")
            return web.Response(status=304, headers={"ETag": etag})
        out = await _table_response(request, wh, ns, table, vend=False)
        return web.json_response(out, headers={"ETag": etag})
    out = await _table_response(request, wh, ns, table, vend=vend)
    if "storage-credentials" in out:
        state_of(request).stats.incr("load_table_vended")
    return web.json_response(out)


async def table_exists(request: web.Request) -> web.Response:
    _table_from_path(request, replica=True)
    return web.Response(status=204)


def commit_ident(levels: list[str], name: str,
                 identifier: TableIdentifier | None) -> tuple[list[str], str]:
    """The table a commit changes, Lakekeeper's `determine_table_ident`
    (crates/lakekeeper/src/server/tables.rs): the path's table when the body names none or the
    same one; the body's when the path has the branch shape Spark sends (path namespace
    `ns.table`, any path table, identifier `ns` / `table`); else 400 TableIdentifierMismatch.
    Decided before any namespace is looked up, as there."""
    if identifier is None:
        return levels, name
    named = (list(identifier.namespace.root), identifier.name)
    if named == (levels, name):
        return named
    if len(levels) >= 2 and named == (levels[:-1], levels[-1]):
        return named
    raise ApiError(400, "TableIdentifierMismatch",
                   "Table identifier in path does not match the one in the request body")


async def commit_table(request: web.Request) -> web.Response:
    cat = catalog_of(request)
    wh = warehouse_from_prefix(request)
    levels = decode_namespace_segment(request.match_info["namespace"])
    body = await read_json(request, CommitIcebergTable)
    parts, name = commit_ident(levels, request.match_info["table"].replace("+", " "),
                               body.identifier)
    ns = namespace_from_body(request, wh, parts)
    existing = cat.store.get(ns, name)
    creating = any(isinstance(r, AssertCreate) for r in body.requirements)
    if existing is None and not creating:
        raise _not_found()
    lock_key = existing.id if existing is not None else f"create:{ns.id}:{name.casefold()}"
    async with cat.locks.hold(lock_key):
        current = cat.store.get(ns, name)
        base = parse_metadata(current.metadata_json) if current is not None else None
        base_location = current.metadata_location if current is not None else None
        try:
            metadata, new_location = apply_commit(base, base_location, body)
        except CommitFailedException as exc:
            raise ApiError(409, "CommitFailedException", f"Commit failed: {exc}") from exc
        except ValueError as exc:
            raise ApiError(400, "BadRequestException", f"Invalid update: {exc}") from exc
        table_id = current.id if current is not None else str(metadata.table_uuid)
        if current is None and not metadata.location:
            raise ApiError(400, "BadRequestException", "A created table needs a location")
        location = current.location if current is not None else metadata.location
        cred = await _catalog_cred(request, wh, ns, table_id, name, location,
                                   Permission.READ_WRITE_DELETE)
        await write_metadata(metadata, new_location, _io_props(wh, cred))
        raw = dump_metadata(metadata)
        if current is None:
            try:
                cat.store.create(
                    table_id=table_id, ns=ns, name=name, location=location,
                    metadata_location=new_location, metadata_json=raw,
                )  # fmt: skip
            except ConflictError as exc:
                raise ApiError(
                    409, "CommitFailedException", "Table was created concurrently"
                ) from exc
        elif not cat.store.swap_metadata(current.id, current.metadata_location, new_location, raw):
            raise ApiError(409, "CommitFailedException", "Table metadata changed concurrently")
    # Lakekeeper's updateTable: the CommitTableRequest, U+001F-joined namespace, empty prefix.
    data = {**body.model_dump(by_alias=True, mode="json"),
            "identifier": {"namespace": ns.parts, "name": name}}
    await emit(request, "updateTable", tabular_type="Table", tabular_id=table_id,
               warehouse_id=wh.id, name=name, namespace=ns.parts, join=UNIT, prefix="",
               data=data)
    return web.json_response(
        {"metadata-location": new_location, "metadata": metadata_dict(metadata)}
    )


async def drop_table(request: web.Request) -> web.Response:
    wh, ns, table = _table_from_path(request)
    purge = query_bool(request, "purgeRequested", False)
    lag = state_of(request).faults.replica
    lag.wrote(lag.key("iceberg", ns.id, table.name), table)
    catalog_of(request).store.delete(table.id)
    if purge:
        schedule_purge(request.app, wh, _as_tabular(table.id, ns, table.name, table.location))
    await emit(request, "dropTable", tabular_type="Table", tabular_id=table.id,
               warehouse_id=wh.id, name=table.name, namespace=ns.parts, join=DOT, prefix=None)
    return web.Response(status=204)


async def rename_table(request: web.Request) -> web.Response:
    st = state_of(request)
    cat = catalog_of(request)
    wh = warehouse_from_prefix(request)
    body = await read_json(request, RenameIcebergTable)
    src, dst = body.source, body.destination
    for ident in (src, dst):
        validate_namespace(list(ident.namespace.root))
        _validate_name(ident.name)
    src_ns = namespace_from_body(request, wh, list(src.namespace.root))
    table = cat.store.get(src_ns, src.name)
    if table is None:
        raise _not_found()
    dst_ns = namespace_from_body(request, wh, list(dst.namespace.root))
    if src_ns.id == dst_ns.id and src.name == dst.name:
        return web.Response(status=204)
    other = cat.store.get(dst_ns, dst.name)
    if (other is not None and other.id != table.id) or st.store.get_table(dst_ns, dst.name):
        raise _already_exists()
    st.faults.replica.wrote(st.faults.replica.key("iceberg", src_ns.id, table.name), table)
    st.faults.replica.wrote(st.faults.replica.key("iceberg", dst_ns.id, dst.name), other)
    try:
        cat.store.rename(table.id, dst_ns, dst.name)
    except ConflictError as exc:
        raise _already_exists() from exc
    # Lakekeeper names the source as the request spelled it (not as stored), U+001F-joined.
    await emit(request, "renameTable", tabular_type="Table", tabular_id=table.id,
               warehouse_id=wh.id, name=src.name, namespace=list(src.namespace.root), join=UNIT,
               prefix="", data={"source": {"namespace": list(src.namespace.root),
                                           "name": src.name},
                                "destination": {"namespace": list(dst.namespace.root),
                                                "name": dst.name}})
    return web.Response(status=204)


async def register_table(request: web.Request) -> web.Response:
    """Register a metadata file already in storage as a table (`overwrite`: replace the table
    of that name, as Lakekeeper does, with only a `registerTable` event)."""
    st = state_of(request)
    cat = catalog_of(request)
    wh = warehouse_from_prefix(request)
    ns = namespace_from_path(request, wh)
    body = await read_json(request, RegisterIcebergTable)
    _validate_name(body.name)
    existing = cat.store.get(ns, body.name)
    if (existing is not None and not body.overwrite) or st.store.get_table(ns, body.name):
        raise _already_exists()
    if not wh.storage_profile.get("sts-enabled"):
        raise ApiError(400, "Misconfiguration", "Reading metadata needs an STS warehouse")
    # The table's root holds `metadata/<file>`: read the file with a credential for that root.
    root = body.metadata_location.rsplit("/", 2)[0]
    cred = await _catalog_cred(request, wh, ns, str(uuid7()), body.name, root, Permission.READ)
    try:
        metadata = await read_metadata(body.metadata_location, _io_props(wh, cred))
    except (OSError, ValueError) as exc:
        raise ApiError(400, "BadRequestException", f"Cannot read the metadata: {exc}") from exc
    if metadata.location.rstrip("/") != root:
        raise ApiError(400, "BadRequestException", "The metadata file is not under its table")
    table_id = str(metadata.table_uuid)
    st.faults.replica.wrote(st.faults.replica.key("iceberg", ns.id, body.name), existing)
    if existing is not None:
        cat.store.delete(existing.id)
    try:
        cat.store.create(
            table_id=table_id, ns=ns, name=body.name, location=metadata.location,
            metadata_location=body.metadata_location, metadata_json=dump_metadata(metadata),
        )  # fmt: skip
    except ConflictError as exc:
        raise _already_exists() from exc
    await emit(request, "registerTable", tabular_type="Table", tabular_id=table_id,
               warehouse_id=wh.id, name=body.name, namespace=ns.parts, join=DOT, prefix=None)
    table = cat.store.get(ns, body.name)
    assert table is not None
    return web.json_response(await _table_response(request, wh, ns, table,
                                                   vend=not client_managed(request)))


async def load_table_credentials(request: web.Request) -> web.Response:
    wh, ns, table = _table_from_path(request, replica=True)
    # client-managed counts as "not specified" here; remote-signing alone selects signing: []
    values = delegation_values(request) - {"client-managed"}
    if not select_delegation(values, wh.storage_profile)[0]:
        return web.json_response({"storage-credentials": []})
    cred = await _vend(
        request, wh, ns, table.id, table.name, table.location, permission_of(request)
    )
    creds = _storage_credentials(request, wh, ns, table.name, table.location, cred)
    return web.json_response({"storage-credentials": creds})


def namespace_has_tables(request: web.Request, ns: Namespace) -> bool:
    """Whether a namespace holds Iceberg tables (a non-recursive drop must refuse it)."""
    return catalog_of(request).store.has_tables(ns)


def forget_dropped_namespaces(request: web.Request, wh: Warehouse) -> None:
    """After a recursive namespace drop: drop the Iceberg tables of namespaces that are gone."""
    st, store = state_of(request), catalog_of(request).store
    for nid in store.namespace_ids(wh.id):
        if st.store.get_namespace_by_id(nid) is None:
            store.delete_namespace_tables(nid)


async def _close(app: web.Application) -> None:
    app[ICEBERG].store.close()


def setup(app: web.Application, db_path: str) -> None:
    """Register the Iceberg table routes and their store on the emulator app."""
    app[ICEBERG] = IcebergCatalog(store=IcebergStore(db_path), locks=TableLocks())
    t = TABLES + "/{table}"
    app.router.add_get(TABLES, list_tables, name="list_tables", allow_head=False)
    app.router.add_post(TABLES, create_table, name="create_table")
    app.router.add_get(t, load_table, name="load_table", allow_head=False)
    app.router.add_head(t, table_exists, name="table_exists")
    app.router.add_post(t, commit_table, name="commit_table")
    app.router.add_delete(t, drop_table, name="drop_table")
    app.router.add_get(
        t + "/credentials", load_table_credentials, name="load_table_credentials", allow_head=False
    )
    app.router.add_post(RENAME, rename_table, name="rename_table")
    app.router.add_post(REGISTER, register_table, name="register_table")
    app.on_cleanup.append(_close)
