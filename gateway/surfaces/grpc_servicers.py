"""CredentialService and CatalogService (lakegate.v1): protobuf ↔ domain models, then the service.

Conversion happens here and only here for gRPC; validation errors are InvalidRequestError, which
the call wrapper turns into INVALID_ARGUMENT.
"""

from __future__ import annotations

from dataclasses import replace

import grpc
from google.protobuf.message import Message

from gateway.errors import InvalidRequestError
from gateway.models import (
    AccessMode,
    CreateTableSpec,
    LoadResult,
    Outcome,
    StorageCredential,
    TableRef,
    table_kind,
)
from gateway.names import check_name, check_namespace, check_warehouse
from gateway.surfaces.accounting import Kind, Recorder
from gateway.surfaces.grpc_interceptors import Behaviour, GrpcCall, guarded, safe_deserializer
from gateway.surfaces.ingress import Gate
from gateway.surfaces.operations import Operations
from gateway.surfaces.render import config_strings
from lakegate.v1 import catalog_pb2, common_pb2, credentials_pb2

_OUTCOMES = {
    Outcome.HIT: common_pb2.CACHE_OUTCOME_HIT,
    Outcome.MISS: common_pb2.CACHE_OUTCOME_MISS,
    Outcome.COALESCED: common_pb2.CACHE_OUTCOME_COALESCED,
    Outcome.STALE: common_pb2.CACHE_OUTCOME_STALE,
}


def access_of(value: int) -> AccessMode:
    if value in (common_pb2.ACCESS_MODE_UNSPECIFIED, common_pb2.ACCESS_MODE_READ):
        return AccessMode.READ
    if value == common_pb2.ACCESS_MODE_WRITE:
        return AccessMode.WRITE
    raise InvalidRequestError("access must be ACCESS_MODE_READ or ACCESS_MODE_WRITE")


def access_pb(access: AccessMode) -> common_pb2.AccessMode:
    if access is AccessMode.WRITE:
        return common_pb2.ACCESS_MODE_WRITE
    return common_pb2.ACCESS_MODE_READ


def ref_of(table: common_pb2.TableRef) -> TableRef:
    return TableRef(warehouse=table.warehouse, namespace=tuple(table.namespace), name=table.name)


def credential_pb(cred: StorageCredential) -> common_pb2.StorageCredential:
    return common_pb2.StorageCredential(
        prefix=cred.prefix,
        config=config_strings(cred.config),
        expires_at_ms=cred.expires_at_ms or 0,
    )


def load_pb(result: LoadResult) -> catalog_pb2.LoadTableResponse:
    t = result.table
    return catalog_pb2.LoadTableResponse(
        table=common_pb2.GenericTable(
            name=t.name, format=t.format, base_location=t.base_location,
            protected=bool(t.protected), doc=t.doc or "", properties=config_strings(t.properties),
        ),
        config=config_strings(result.config or {}),
        credentials=[credential_pb(c) for c in result.credentials or ()],
        warehouse_id=result.warehouse.id,
    )


class _Servicer:
    """What every servicer method works with: the operations and the admission gate."""

    def __init__(self, ops: Operations, gate: Gate) -> None:
        self._ops = ops
        self._gate = gate


class CredentialServicer(_Servicer):
    """lakegate.v1.CredentialService."""

    async def GetTableCredentials(
        self, request: credentials_pb2.GetTableCredentialsRequest, call: GrpcCall
    ) -> credentials_pb2.GetTableCredentialsResponse:
        ref = ref_of(request.table)
        if table_kind(request.kind) == "iceberg":
            ref = replace(ref, kind="iceberg")
        access = access_of(request.access)
        await self._gate.authorize(call.caller, call.ctx, ref.scope, access)
        lookup = await self._ops.get_credentials(ref, access, call.ctx)
        call.tally.served(lookup.outcome, lookup.remaining_s)
        creds = lookup.credentials
        return credentials_pb2.GetTableCredentialsResponse(
            warehouse_id=lookup.warehouse.id,
            location=creds.location,
            credentials=[credential_pb(c) for c in creds.credentials],
            expires_at_ms=creds.expires_at_ms or 0,
            remaining_seconds=lookup.remaining_s or 0.0,
            outcome=_OUTCOMES.get(lookup.outcome, common_pb2.CACHE_OUTCOME_UNSPECIFIED),
            access=access_pb(access),
        )

    async def InvalidateCredentials(
        self, request: credentials_pb2.InvalidateCredentialsRequest, call: GrpcCall
    ) -> credentials_pb2.InvalidateCredentialsResponse:
        if request.all:
            self._gate.authorize_global(call.caller)
            count = self._ops.invalidate(all=True)
        else:
            ref = ref_of(request.table)
            await self._gate.authorize(call.caller, call.ctx, ref.scope, AccessMode.WRITE)
            # A name never seen (callers used the UUID) is resolved upstream; unknown: 404.
            await self._ops.resolve_warehouse(ref.warehouse, call.ctx)
            count = self._ops.invalidate(ref)
        call.tally.served("hit")
        return credentials_pb2.InvalidateCredentialsResponse(invalidated=count)


class CatalogServicer(_Servicer):
    """lakegate.v1.CatalogService."""

    async def LoadTable(
        self, request: catalog_pb2.LoadTableRequest, call: GrpcCall
    ) -> catalog_pb2.LoadTableResponse:
        ref = ref_of(request.table)
        access = access_of(request.access)
        await self._gate.authorize(call.caller, call.ctx, ref.scope, access)
        result = await self._ops.load_table(ref, call.ctx, vended=request.vended, access=access)
        call.tally.served(result.outcome or "miss")
        return load_pb(result)

    async def ListTables(
        self, request: catalog_pb2.ListTablesRequest, call: GrpcCall
    ) -> catalog_pb2.ListTablesResponse:
        warehouse = check_warehouse(request.warehouse)
        namespace = check_namespace(request.namespace)
        await self._gate.authorize(call.caller, call.ctx, (warehouse, namespace, None),
                                   AccessMode.READ)
        result = await self._ops.list_tables(
            warehouse, namespace, call.ctx,
            # 0 is proto3's "unset"; the bounds are the service's (one setting for all surfaces).
            page_token=request.page_token or None, page_size=request.page_size or None,
        )
        return catalog_pb2.ListTablesResponse(
            identifiers=[
                common_pb2.TableIdentifier(namespace=list(i.namespace), name=i.name,
                                           format=i.format or "", id=i.id or "")
                for i in result.identifiers
            ],
            next_page_token=result.next_page_token or "",
        )

    async def CreateTable(
        self, request: catalog_pb2.CreateTableRequest, call: GrpcCall
    ) -> catalog_pb2.LoadTableResponse:
        ref = ref_of(request.table)
        if not request.format:
            raise InvalidRequestError("format is required")
        await self._gate.authorize(call.caller, call.ctx, ref.scope, AccessMode.WRITE)
        spec = CreateTableSpec(
            name=ref.name, format=request.format, base_location=request.base_location or None,
            doc=request.doc or None, properties=dict(request.properties) or None,
        )
        ctx = call.ctx
        if request.idempotency_key:
            ctx = replace(ctx, idempotency_key=request.idempotency_key)
        result = await self._ops.create_table(ref.warehouse, ref.namespace, spec, ctx)
        return load_pb(result)

    async def DropTable(
        self, request: catalog_pb2.DropTableRequest, call: GrpcCall
    ) -> catalog_pb2.DropTableResponse:
        ref = ref_of(request.table)
        await self._gate.authorize(call.caller, call.ctx, ref.scope, AccessMode.WRITE)
        await self._ops.drop_table(ref, call.ctx, purge=request.purge, force=request.force)
        return catalog_pb2.DropTableResponse()

    async def RenameTable(
        self, request: catalog_pb2.RenameTableRequest, call: GrpcCall
    ) -> catalog_pb2.RenameTableResponse:
        warehouse = check_warehouse(request.warehouse)
        source = (check_namespace(request.source_namespace, "source_namespace"),
                  check_name(request.source_name, "source_name"))
        destination = (check_namespace(request.destination_namespace, "destination_namespace"),
                       check_name(request.destination_name, "destination_name"))
        for ref in (TableRef(warehouse, *source), TableRef(warehouse, *destination)):
            await self._gate.authorize(call.caller, call.ctx, ref.scope, AccessMode.WRITE)
        await self._ops.rename_table(warehouse, source, destination, call.ctx)
        return catalog_pb2.RenameTableResponse()

    async def ResolveWarehouse(
        self, request: catalog_pb2.ResolveWarehouseRequest, call: GrpcCall
    ) -> catalog_pb2.ResolveWarehouseResponse:
        wh = await self._ops.resolve_warehouse(check_warehouse(request.warehouse), call.ctx)
        return catalog_pb2.ResolveWarehouseResponse(warehouse_id=wh.id, name=wh.name)


_CREDENTIAL_METHODS: dict[str, tuple[type[Message], type[Message], Kind]] = {
    "GetTableCredentials": (credentials_pb2.GetTableCredentialsRequest,
                            credentials_pb2.GetTableCredentialsResponse, "credential"),
    "InvalidateCredentials": (credentials_pb2.InvalidateCredentialsRequest,
                              credentials_pb2.InvalidateCredentialsResponse, "admin"),
}
_CATALOG_METHODS: dict[str, tuple[type[Message], type[Message], Kind]] = {
    "LoadTable": (catalog_pb2.LoadTableRequest, catalog_pb2.LoadTableResponse, "metadata"),
    "ListTables": (catalog_pb2.ListTablesRequest, catalog_pb2.ListTablesResponse, "metadata"),
    "CreateTable": (catalog_pb2.CreateTableRequest, catalog_pb2.LoadTableResponse, "metadata"),
    "DropTable": (catalog_pb2.DropTableRequest, catalog_pb2.DropTableResponse, "metadata"),
    "RenameTable": (catalog_pb2.RenameTableRequest, catalog_pb2.RenameTableResponse, "metadata"),
    "ResolveWarehouse": (catalog_pb2.ResolveWarehouseRequest,
                         catalog_pb2.ResolveWarehouseResponse, "metadata"),
}


# Every served method by service: (request type, response type, metrics kind). The servers
# register exactly these, and the hostile-input test walks exactly these.
SERVICES: dict[str, dict[str, tuple[type[Message], type[Message], Kind]]] = {
    "lakegate.v1.CredentialService": _CREDENTIAL_METHODS,
    "lakegate.v1.CatalogService": _CATALOG_METHODS,
}


def generic_handlers(
    ops: Operations, gate: Gate, recorder: Recorder
) -> list[grpc.GenericRpcHandler]:
    """The method handlers of both services, each wrapped by `guarded`."""
    servicers = {"lakegate.v1.CredentialService": CredentialServicer(ops, gate),
                 "lakegate.v1.CatalogService": CatalogServicer(ops, gate)}
    out = []
    for service_name, methods in SERVICES.items():
        servicer = servicers[service_name]
        handlers = {}
        for name, (req_type, resp_type, kind) in methods.items():
            method: Behaviour = getattr(servicer, name)
            handlers[name] = grpc.unary_unary_rpc_method_handler(
                guarded(method, gate=gate, recorder=recorder, kind=kind),
                request_deserializer=safe_deserializer(req_type),
                response_serializer=resp_type.SerializeToString,
            )
        out.append(grpc.method_handlers_generic_handler(service_name, handlers))
    return out
