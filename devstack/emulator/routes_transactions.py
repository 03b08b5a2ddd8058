"""Iceberg multi-table commit (`POST /catalog/v1/{prefix}/transactions/commit`), as Lakekeeper
serves it: every change names its table; all requirements are checked before anything is
written (one stale requirement: 409, nothing changed); then each table's new metadata file is
written and its pointer swapped, and one `updateTable` event per table change is published
with `num-events` N and `sequence-number` 0..N-1 (Lakekeeper's `transaction_committed`).

Deviation: tables that do not exist yet (`assert-create`) are refused (404), not created.
"""

from __future__ import annotations

from contextlib import AsyncExitStack

from aiohttp import web
from pydantic import Field
from pyiceberg.exceptions import CommitFailedException
from pyiceberg.table.metadata import TableMetadata

from devstack.emulator.errors import ApiError
from devstack.emulator.events import UNIT
from devstack.emulator.iceberg_meta import (
    CommitIcebergTable,
    apply_commit,
    dump_metadata,
    parse_metadata,
    write_metadata,
)
from devstack.emulator.iceberg_store import IcebergTable
from devstack.emulator.models import Namespace
from devstack.emulator.names import validate_namespace
from devstack.emulator.policy import Permission
from devstack.emulator.publish import emit
from devstack.emulator.routes_iceberg import _io_props, _vend, catalog_of
from devstack.emulator.state import namespace_from_body, warehouse_from_prefix
from devstack.emulator.wire import Body, read_json

TRANSACTIONS = "/catalog/v1/{prefix}/transactions/commit"
ENDPOINTS = ("POST /v1/{prefix}/transactions/commit",)


class CommitTransaction(Body):
    """Iceberg `CommitTransactionRequest`."""

    table_changes: tuple[CommitIcebergTable, ...] = Field(alias="table-changes", min_length=1)


async def commit_transaction(request: web.Request) -> web.Response:
    cat = catalog_of(request)
    wh = warehouse_from_prefix(request)
    body = await read_json(request, CommitTransaction)
    targets: list[tuple[Namespace, IcebergTable, CommitIcebergTable]] = []
    for change in body.table_changes:
        if change.identifier is None:
            raise ApiError(400, "BadRequestException", "Every table change needs an identifier")
        parts = list(change.identifier.namespace.root)
        validate_namespace(parts)
        ns = namespace_from_body(request, wh, parts)
        table = cat.store.get(ns, change.identifier.name)
        if table is None:
            raise ApiError(404, "NoSuchTableException", "Table does not exist")
        if any(t.id == table.id for _, t, _ in targets):
            raise ApiError(400, "BadRequestException", "A table is changed twice")
        targets.append((ns, table, change))
    staged: list[tuple[Namespace, IcebergTable, CommitIcebergTable, TableMetadata, str]] = []
    async with AsyncExitStack() as locks:
        for table_id in sorted(t.id for _, t, _ in targets):  # one order: no deadlock
            await locks.enter_async_context(cat.locks.hold(table_id))
        for ns, table, change in targets:
            current = cat.store.get_by_id(table.id)
            if current is None:
                raise ApiError(404, "NoSuchTableException", "Table does not exist")
            try:
                metadata, new_location = apply_commit(
                    parse_metadata(current.metadata_json), current.metadata_location, change)
            except CommitFailedException as exc:
                raise ApiError(409, "CommitFailedException", f"Commit failed: {exc}") from exc
            except ValueError as exc:
                raise ApiError(400, "BadRequestException", f"Invalid update: {exc}") from exc
            staged.append((ns, current, change, metadata, new_location))
        for ns, current, _, metadata, new_location in staged:
            cred = await _vend(request, wh, ns, current.id, current.name, current.location,
                               Permission.READ_WRITE_DELETE)
            await write_metadata(metadata, new_location, _io_props(wh, cred))
        for _, current, _, metadata, new_location in staged:
            if not cat.store.swap_metadata(current.id, current.metadata_location, new_location,
                                           dump_metadata(metadata)):
                raise ApiError(409, "CommitFailedException",
                               "Table metadata changed concurrently")
    # Named as the request spelled each table (its identifier), U+001F-joined, empty prefix.
    for i, (_, current, change, _, _) in enumerate(staged):
        ident = change.identifier
        assert ident is not None  # checked above
        await emit(request, "updateTable", tabular_type="Table", tabular_id=current.id,
                   warehouse_id=wh.id, name=ident.name, namespace=list(ident.namespace.root),
                   join=UNIT, prefix="", data=change.model_dump(by_alias=True, mode="json"),
                   num_events=len(staged), sequence_number=i)
    return web.Response(status=204)


def add_routes(app: web.Application) -> None:
    app.router.add_post(TRANSACTIONS, commit_transaction, name="commit_transaction")
