"""gRPC side of the sans-IO core: proto messages to and from the client's value types, and
gRPC status + ``lakegate-error-bin`` trailing metadata (an ErrorDetail) to the LakegateError tree.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from types import MappingProxyType
from typing import cast

import grpc
from google.protobuf.message import DecodeError

from lakegate.v1 import catalog_pb2, common_pb2, credentials_pb2
from lakegate_client._errors import (
    GatewayConnectionError,
    GatewayTimeoutError,
    LakegateError,
    RateLimitedError,
    error_for_status,
)
from lakegate_client._http_codec import retry_after_seconds, vended_credentials
from lakegate_client._models import Access, LoadedTable, TableIdentifier, TableRef, TableSpec
from lakegate_client.credentials import StorageCredential, TableCredentials

__all__ = [
    "ERROR_DETAIL_KEY",
    "access_proto",
    "credentials_from_proto",
    "error_from_grpc",
    "grpc_credentials_request",
    "identifiers_from_proto",
    "loaded_from_proto",
    "table_ref_proto",
]

ERROR_DETAIL_KEY = "lakegate-error-bin"

_ACCESS: Mapping[str, common_pb2.AccessMode] = MappingProxyType(
    {
        "read": common_pb2.ACCESS_MODE_READ,
        "write": common_pb2.ACCESS_MODE_WRITE,
    }
)
_OUTCOME = MappingProxyType(
    {
        common_pb2.CACHE_OUTCOME_HIT: "hit",
        common_pb2.CACHE_OUTCOME_MISS: "miss",
        common_pb2.CACHE_OUTCOME_COALESCED: "coalesced",
        common_pb2.CACHE_OUTCOME_STALE: "stale",
    }
)
# A gRPC status without the gateway's ErrorDetail → the HTTP status whose error class it means.
_GRPC_STATUS: Mapping[grpc.StatusCode, int] = MappingProxyType(
    {
        grpc.StatusCode.INVALID_ARGUMENT: 400,
        grpc.StatusCode.FAILED_PRECONDITION: 400,
        grpc.StatusCode.OUT_OF_RANGE: 400,
        grpc.StatusCode.UNAUTHENTICATED: 401,
        grpc.StatusCode.PERMISSION_DENIED: 403,
        grpc.StatusCode.NOT_FOUND: 404,
        grpc.StatusCode.ALREADY_EXISTS: 409,
        grpc.StatusCode.ABORTED: 409,
        grpc.StatusCode.RESOURCE_EXHAUSTED: 429,
        grpc.StatusCode.UNAVAILABLE: 503,
        grpc.StatusCode.INTERNAL: 500,
        grpc.StatusCode.UNKNOWN: 500,
        grpc.StatusCode.UNIMPLEMENTED: 500,
    }
)


def access_proto(access: Access) -> common_pb2.AccessMode:
    """``read``/``write`` → the proto enum."""
    return _ACCESS[access]


def table_ref_proto(ref: TableRef) -> common_pb2.TableRef:
    """The gRPC message for a table reference."""
    return common_pb2.TableRef(
        warehouse=ref.warehouse, namespace=list(ref.namespace), name=ref.name
    )


def grpc_credentials_request(
    ref: TableRef, access: Access, expected_location: str | None = None,
    table_id: str | None = None,
) -> credentials_pb2.GetTableCredentialsRequest:
    """The GetTableCredentials request (fields 4/5: the expected identity, "" = none)."""
    return credentials_pb2.GetTableCredentialsRequest(
        table=table_ref_proto(ref),
        access=_ACCESS[access],
        kind="iceberg" if ref.kind == "iceberg" else "",
        expected_location=expected_location or "",
        table_id=table_id or "",
    )


def grpc_create_request(
    ref: TableRef, spec: TableSpec, idempotency_key: str
) -> catalog_pb2.CreateTableRequest:
    """The CreateTable request."""
    return catalog_pb2.CreateTableRequest(
        table=table_ref_proto(ref),
        format=spec.format,
        base_location=spec.base_location or "",
        doc=spec.doc or "",
        properties=dict(spec.properties or {}),
        idempotency_key=idempotency_key,
    )


def grpc_rename_request(source: TableRef, destination: TableRef) -> catalog_pb2.RenameTableRequest:
    """The RenameTable request."""
    return catalog_pb2.RenameTableRequest(
        warehouse=source.warehouse,
        source_namespace=list(source.namespace),
        source_name=source.name,
        destination_namespace=list(destination.namespace),
        destination_name=destination.name,
    )


def _storage_from_proto(items: Sequence[common_pb2.StorageCredential]) -> list[StorageCredential]:
    return [
        StorageCredential(
            prefix=c.prefix, config=dict(c.config), expires_at_ms=c.expires_at_ms or None
        )
        for c in items
    ]


def credentials_from_proto(
    msg: credentials_pb2.GetTableCredentialsResponse, ref: TableRef, access: Access
) -> TableCredentials:
    """A GetTableCredentialsResponse → TableCredentials."""
    creds = _storage_from_proto(msg.credentials)
    return TableCredentials.from_parts(
        location=msg.location or (creds[0].prefix if creds else ""),
        credentials=creds,
        expires_at_ms=msg.expires_at_ms or None,
        outcome=_OUTCOME.get(msg.outcome, ""),
        access=access,
        warehouse_id=msg.warehouse_id,
        namespace=ref.namespace,
        table=ref.name,
        served_remaining_s=msg.remaining_seconds,
        table_id=msg.table_id or None,
        identity_ttl_s=(msg.identity_ttl_seconds if msg.HasField("identity_ttl_seconds")
                        else None),
    )


def loaded_from_proto(
    msg: catalog_pb2.LoadTableResponse, ref: TableRef, access: Access, vended: bool
) -> LoadedTable:
    """A LoadTableResponse → LoadedTable."""
    config = dict(msg.config)
    creds = _storage_from_proto(msg.credentials)
    credentials = None
    if vended:
        location, warehouse_id = msg.table.base_location, msg.warehouse_id
        credentials = vended_credentials(ref, access, location, creds, config, warehouse_id)
    return LoadedTable(
        namespace=ref.namespace,
        name=msg.table.name or ref.name,
        format=msg.table.format,
        base_location=msg.table.base_location,
        warehouse_id=msg.warehouse_id,
        protected=msg.table.protected,
        doc=msg.table.doc or None,
        properties=dict(msg.table.properties),
        config=config,
        credentials=credentials,
    )


def identifiers_from_proto(
    msg: catalog_pb2.ListTablesResponse,
) -> tuple[list[TableIdentifier], str | None]:
    """A ListTablesResponse → (identifiers, next page token or None)."""
    ids = [
        TableIdentifier(namespace=tuple(i.namespace), name=i.name, format=i.format, id=i.id)
        for i in msg.identifiers
    ]
    return ids, msg.next_page_token or None


def trailing_pairs(exc: grpc.RpcError) -> list[tuple[str, str | bytes]]:
    """A failed RPC's trailing metadata as ``(key, value)`` pairs.

    grpcio hands back plain tuples (sync) or an ``aio.Metadata`` (async), both iterating as pairs;
    the typeshed stub declares ``_Metadatum`` objects instead, hence the cast.
    """
    return list(cast("Iterable[tuple[str, str | bytes]]", exc.trailing_metadata() or ()))


def error_from_grpc(
    code: grpc.StatusCode | None,
    details: str | None,
    trailing: Sequence[tuple[str, str | bytes]] | None,
    target: str,
) -> LakegateError:
    """A failed RPC → LakegateError.

    The ``lakegate-error-bin`` trailer (an ErrorDetail) says the gateway itself answered, so its
    HTTP status picks the class. Without it, UNAVAILABLE means the channel never reached a gateway
    (refused, socket missing): that is a :class:`GatewayConnectionError`, not an upstream outage.
    """
    detail: common_pb2.ErrorDetail | None = None
    for key, value in trailing or ():
        if key == ERROR_DETAIL_KEY and isinstance(value, bytes):
            parsed = common_pb2.ErrorDetail()
            try:
                parsed.ParseFromString(value)
            except DecodeError:
                continue  # a garbled trailer must not hide the real status
            detail = parsed
    retry_after = None
    for key, value in trailing or ():
        if key == "retry-after" and isinstance(value, str):
            retry_after = retry_after_seconds(value)
    message = (detail.message if detail else "") or details or f"gRPC {code}"
    if detail is not None and detail.http_status:
        cls = error_for_status(detail.http_status, detail.type)
        status = detail.http_status
    elif code == grpc.StatusCode.UNAVAILABLE:
        return GatewayConnectionError(
            f"cannot reach the gateway at {target}: {details or 'unavailable'}",
            type="GatewayUnreachable",
        )
    elif code == grpc.StatusCode.DEADLINE_EXCEEDED:
        cls, status = GatewayTimeoutError, None
    else:
        http_status = _GRPC_STATUS.get(code) if code is not None else None
        cls = error_for_status(http_status) if http_status else LakegateError
        status = None
    type_ = detail.type if detail else ""
    request_id = detail.request_id if detail else ""
    if cls is GatewayTimeoutError:
        return GatewayTimeoutError(f"no answer from the gateway at {target} in time: {message}")
    if cls is RateLimitedError:
        return RateLimitedError(
            message, status=status, type=type_, request_id=request_id, retry_after_s=retry_after
        )
    return cls(message, status=status, type=type_, request_id=request_id)
