"""CredentialService and CatalogService (lakegate.v1): protobuf ↔ domain models, then the service.

Conversion happens here and only here for gRPC; validation errors are InvalidRequestError, which
the call wrapper turns into INVALID_ARGUMENT.
"""

from __future__ import annotations

import struct
from collections.abc import Awaitable, Callable
from dataclasses import replace
from typing import Any, NamedTuple

import grpc
from google.protobuf.message import DecodeError, Message

from gateway.audit import TableNotes
from gateway.errors import InvalidRequestError
from gateway.identity import ExpectedIdentity
from gateway.logging import request_id_var
from gateway.models import (
    AccessMode,
    CallerIdentity,
    CreateTableSpec,
    CredentialLookup,
    LoadResult,
    Outcome,
    RequestContext,
    StorageCredential,
    TableRef,
    table_kind,
)
from gateway.names import check_name, check_namespace, check_warehouse
from gateway.surfaces.accounting import Kind, Recorder
from gateway.surfaces.grpc_interceptors import (
    Behaviour,
    GrpcCall,
    call_context,
    failure_of,
    guarded,
    message_scope,
    metadata_of,
    refuse,
    request_id_of,
    safe_deserializer,
    serialize,
)
from gateway.surfaces.ingress import Gate
from gateway.surfaces.memo import BoundedLru
from gateway.surfaces.operations import Operations
from gateway.surfaces.peers import GrpcPeer
from gateway.surfaces.render import RenderedBody, config_strings
from gateway.surfaces.request_ids import RequestIds
from gateway.tuning import MATCH_CACHE_MAX_TARGET, MATCH_CACHE_SIZE
from lakegate.v1 import catalog_pb2, common_pb2, credentials_pb2

# Wire tags: (field number << 3) | wire type (1 = 64-bit, 0 = varint).
_REMAINING_TAG = bytes(((5 << 3) | 1,))
_OUTCOME_TAG = bytes(((6 << 3) | 0,))
_IDENTITY_TTL_TAG = bytes(((9 << 3) | 1,))
_DOUBLE = struct.Struct("<d")
_OUTCOMES = {
    Outcome.HIT: common_pb2.CACHE_OUTCOME_HIT,
    Outcome.MISS: common_pb2.CACHE_OUTCOME_MISS,
    Outcome.COALESCED: common_pb2.CACHE_OUTCOME_COALESCED,
    Outcome.STALE: common_pb2.CACHE_OUTCOME_STALE,
}


_ACCESS_OF: dict[int, AccessMode] = {
    common_pb2.ACCESS_MODE_UNSPECIFIED: AccessMode.READ,
    common_pb2.ACCESS_MODE_READ: AccessMode.READ,
    common_pb2.ACCESS_MODE_WRITE: AccessMode.WRITE,
}


def access_of(value: int) -> AccessMode:
    """The proto access mode (unspecified = read); one dict lookup, no enum attribute."""
    access = _ACCESS_OF.get(value)
    if access is None:
        raise InvalidRequestError("access must be ACCESS_MODE_READ or ACCESS_MODE_WRITE")
    return access


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


def credentials_pb(lookup: CredentialLookup) -> credentials_pb2.GetTableCredentialsResponse:
    """The whole GetTableCredentialsResponse of `lookup` (what `credentials_pb_parts` splits)."""
    creds = lookup.credentials
    return credentials_pb2.GetTableCredentialsResponse(
        warehouse_id=lookup.warehouse.id,
        location=creds.location,
        credentials=[credential_pb(c) for c in creds.credentials],
        expires_at_ms=creds.expires_at_ms or 0,
        remaining_seconds=lookup.remaining_s or 0.0,
        outcome=_OUTCOMES.get(lookup.outcome, common_pb2.CACHE_OUTCOME_UNSPECIFIED),
        access=access_pb(lookup.access),
        table_id=creds.table_id or "",
        identity_ttl_seconds=lookup.identity_ttl_s,
    )


def credentials_pb_parts(lookup: CredentialLookup) -> tuple[bytes, bytes]:
    """The serialized fields before (1-4) and after (7, 8) the per-call fields 5, 6 (and 9).

    Fields are written in number order, so head + fields 5, 6 + tail + field 9 are the bytes
    `credentials_pb(lookup).SerializeToString()` writes.
    """
    full = credentials_pb(lookup)
    tail = credentials_pb2.GetTableCredentialsResponse(access=full.access,
                                                       table_id=full.table_id)
    full.ClearField("access")
    full.ClearField("table_id")
    full.ClearField("remaining_seconds")
    full.ClearField("outcome")
    full.ClearField("identity_ttl_seconds")
    return full.SerializeToString(), tail.SerializeToString()


def _pb_fields(lookup: CredentialLookup) -> bytes:
    """Fields 5 (double remaining_seconds) and 6 (enum outcome) on the wire; proto3 leaves out
    a field at its default (0)."""
    out = b""
    remaining = lookup.remaining_s or 0.0
    if remaining != 0.0:
        out = _REMAINING_TAG + _DOUBLE.pack(remaining)
    outcome = _OUTCOMES.get(lookup.outcome, common_pb2.CACHE_OUTCOME_UNSPECIFIED)
    if outcome:
        out += _OUTCOME_TAG + bytes((outcome,))  # enum values < 128: a one-byte varint
    return out


def _pb_identity_ttl(lookup: CredentialLookup) -> bytes:
    """Field 9 (optional double identity_ttl_seconds), written whenever it is stated, 0 too."""
    if lookup.identity_ttl_s is None:
        return b""
    return _IDENTITY_TTL_TAG + _DOUBLE.pack(lookup.identity_ttl_s)


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


class _Asked(NamedTuple):
    """A GetTableCredentialsRequest as validated before the policy decision: the table and
    access, and the expected identity's raw fields (validated after it, as always)."""

    ref: TableRef
    access: AccessMode
    location: str
    table_id: str
    expects: bool  # either is set (ExpectedIdentity.of is not None)


# The answer's behaviour on the raw request bytes (registered without a deserializer).
RawBehaviour = Callable[[bytes, grpc.aio.ServicerContext[Any, Any]], Awaitable[bytes]]


class CredentialServicer(_Servicer):
    """lakegate.v1.CredentialService.

    GetTableCredentials is the hot path (executors ask for the same few tables over and over),
    registered as `credentials_behaviour`: `guarded`'s work and the method's in one coroutine,
    on the raw request bytes, answering pre-serialized bytes. Why: in the server each call
    runs cold (grpc's poller thread and C core run between two calls), so its Python cost is
    about three times what a warm loop of the same code measures, and grows with every layer
    it passes; the trivial grpc.aio server runs almost none. The request's validated fields
    are memoized by its bytes (no protobuf decode, no field reads); the answer's fixed part is
    serialized once per (table, access) and set (`RenderedBody`, as on HTTP), and only
    `remaining_seconds`, `outcome` and `identity_ttl_seconds` are encoded per call. Every
    decision (admission, project, policy, the cache's serve floor and identity checks, audit,
    metrics, error mapping) is made on every call, as for every other method.
    """

    def __init__(self, ops: Operations, gate: Gate) -> None:
        super().__init__(ops, gate)
        self._bodies: BoundedLru[tuple[TableRef, AccessMode], RenderedBody] = BoundedLru(
            MATCH_CACHE_SIZE)
        # Validated requests by their bytes: a TableRef checks every name (~10 µs). Only pure
        # results go in (a function of the bytes alone), and only short requests.
        self._asked: BoundedLru[bytes, _Asked] = BoundedLru(MATCH_CACHE_SIZE)

    def _ask(self, raw: bytes, caller: CallerIdentity,
             ctx: RequestContext) -> tuple[_Asked, RequestContext]:
        """Decode and validate a request not memoized yet, in `guarded`'s order: a malformed
        message, then the project header (naming the message's table), then the fields.

        Raises:
            InvalidRequestError: not a protobuf message, a bad name, kind or access.
            PermissionDeniedError: a project the caller may not use.
        """
        try:
            request = credentials_pb2.GetTableCredentialsRequest.FromString(raw)
        except (DecodeError, ValueError, TypeError, RuntimeError):
            raise InvalidRequestError("request is not a valid protobuf message") from None
        if ctx.project_id is not None:
            ctx = self._gate.check_project(caller, ctx, lambda: message_scope(request))
        ref = ref_of(request.table)
        if table_kind(request.kind) == "iceberg":
            ref = replace(ref, kind="iceberg")
        location, table_id = request.expected_location, request.table_id
        asked = _Asked(ref, access_of(request.access), location, table_id,
                       bool(location or table_id))
        if len(raw) <= MATCH_CACHE_MAX_TARGET:
            self._asked.put(raw, asked)
        return asked, ctx

    def credentials_behaviour(self, recorder: Recorder, name: str) -> RawBehaviour:
        """GetTableCredentials as registered: what `guarded(GetTableCredentials)` would do
        (request id, admission, the project header, audit of refusals, metrics, errors mapped
        with the same codes and trailers), on the raw request bytes, answering bytes."""
        gate, ops, asked_by_raw, bodies = self._gate, self._ops, self._asked, self._bodies
        rpc = name.rpartition("/")[2]
        ids = RequestIds()

        calls = recorder.grpc_calls

        async def behaviour(raw: bytes, context: grpc.aio.ServicerContext[Any, Any]) -> bytes:
            calls.started()
            md = metadata_of(context)
            request_id = request_id_of(md, ids)
            token = request_id_var.set(request_id)
            # Refusals and failures are audited per table (audit.TableNotes); a grant has
            # the service's credential line.
            notes = TableNotes(successes=False)
            try:
                with recorder.track("grpc", "credential") as tally:
                    authorization, peer = md.get("authorization"), GrpcPeer(context)
                    caller = (gate.admit_now(authorization, None, peer=peer)
                              or await gate.admit(authorization, None, peer=peer))
                    ctx = call_context(md, request_id, caller, peer.caller_key)
                    asked = asked_by_raw.get(raw)
                    memoized = asked is not None
                    if asked is None:  # (`_ask` checks the project header itself)
                        asked, ctx = self._ask(raw, caller, ctx)
                    ref, access = asked.ref, asked.access
                    scope = ref.scope
                    if memoized and ctx.project_id is not None:
                        ctx = gate.check_project(caller, ctx, lambda: scope)
                    if not gate.authorize_now(caller, ctx, scope, access):
                        await gate.authorize(caller, ctx, scope, access)
                    expect = (ExpectedIdentity.of(asked.location, asked.table_id)
                              if asked.expects else None)
                    lookup = ((None if expect is not None
                               else ops.credentials_now(ref, access, ctx))
                              or await ops.get_credentials(ref, access, ctx, expect=expect))
                    tally.served(lookup.outcome, lookup.remaining_s)
                    key = (ref, access)
                    body = bodies.get(key)
                    if body is None or not body.fits(lookup):
                        body = RenderedBody(lookup, *credentials_pb_parts(lookup))
                        bodies.put(key, body)
                    answer = body.splice(_pb_fields(lookup), _pb_identity_ttl(lookup))
                return answer  # (a grant writes no table line: `finally` closes the notes)
            except Exception as exc:  # noqa: BLE001 - the surface boundary
                error = failure_of(exc)
            finally:
                notes.close()
                request_id_var.reset(token)
            await refuse(context, error, request_id, notes, rpc, name)

        return behaviour

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
            ctx = ctx._replace(idempotency_key=request.idempotency_key)
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
        wh = await self._gate.authorize_warehouse(call.caller, call.ctx,
                                                  check_warehouse(request.warehouse))
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


# The hot method, served by `CredentialServicer.credentials_behaviour` (the rest by `guarded`).
CREDENTIALS_METHOD = ("lakegate.v1.CredentialService", "GetTableCredentials")

# Every served method by service: (request type, response type, metrics kind). The servers
# register exactly these, and the hostile-input test walks exactly these.
SERVICES: dict[str, dict[str, tuple[type[Message], type[Message], Kind]]] = {
    "lakegate.v1.CredentialService": _CREDENTIAL_METHODS,
    "lakegate.v1.CatalogService": _CATALOG_METHODS,
}


def method_handlers(
    ops: Operations, gate: Gate, recorder: Recorder
) -> dict[str, dict[str, grpc.RpcMethodHandler[Any, Any]]]:
    """The method handlers of both services by service name, each wrapped by `guarded` but
    GetTableCredentials (`CredentialServicer.credentials_behaviour` does the same work).

    The server registers them as registered methods (`add_registered_method_handlers`, what
    the generated `add_*Servicer_to_server` does): the core matches the method path, where a
    generic handler costs a Python lookup per call.
    """
    credentials = CredentialServicer(ops, gate)
    servicers = {"lakegate.v1.CredentialService": credentials,
                 "lakegate.v1.CatalogService": CatalogServicer(ops, gate)}
    out: dict[str, dict[str, grpc.RpcMethodHandler[Any, Any]]] = {}
    for service_name, methods in SERVICES.items():
        servicer = servicers[service_name]
        handlers: dict[str, grpc.RpcMethodHandler[Any, Any]] = {}
        for name, (req_type, _, kind) in methods.items():
            if service_name == CREDENTIALS_METHOD[0] and name == CREDENTIALS_METHOD[1]:
                # Bytes in, bytes out: no (de)serializer is grpc's pass-through, no Python call.
                handlers[name] = grpc.unary_unary_rpc_method_handler(
                    credentials.credentials_behaviour(recorder, f"/{service_name}/{name}"))
                continue
            method: Behaviour = getattr(servicer, name)
            handlers[name] = grpc.unary_unary_rpc_method_handler(
                guarded(method, gate=gate, recorder=recorder, kind=kind,
                        name=f"/{service_name}/{name}"),
                request_deserializer=safe_deserializer(req_type),
                response_serializer=serialize,
            )
        out[service_name] = handlers
    return out
