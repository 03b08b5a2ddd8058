"""Sans-IO core shared by every transport and both clients.

Builds requests (HTTP paths and gRPC messages), turns answers into the client's value types, maps
errors (Lakekeeper envelope, gRPC status + ``lakegate-error-bin`` detail) into the ``LakegateError``
tree, and holds the per-process credential memo. Nothing here does I/O.
"""

from __future__ import annotations

import json
import threading
import uuid
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

import grpc  # type: ignore[import-untyped, unused-ignore]
from google.protobuf.message import DecodeError  # type: ignore[import-untyped, unused-ignore]
from lakegate.v1 import catalog_pb2, common_pb2, credentials_pb2

from lakegate_client._clock import Clock
from lakegate_client._config import ClientConfig
from lakegate_client._errors import (
    ConfigurationError,
    ConflictError,
    GatewayConnectionError,
    GatewayTimeoutError,
    InternalError,
    InvalidRequestError,
    LakegateError,
    NotFoundError,
    PermissionDeniedError,
    RateLimitedError,
    UnauthenticatedError,
    UnavailableError,
    error_for_status,
)
from lakegate_client._models import Access, LoadedTable, TableIdentifier
from lakegate_client.credentials import StorageCredential, TableCredentials

__all__ = [
    "ERROR_DETAIL_KEY",
    "CredentialMemo",
    "HttpRequest",
    "TableRef",
    "error_from_grpc",
    "error_from_http",
]

ERROR_DETAIL_KEY = "lakegate-error-bin"
_NS_SEPARATOR = "\x1f"  # Lakekeeper joins namespace levels with U+001F, sent as %1F


@dataclass(frozen=True)
class TableRef:
    """A fully resolved table reference (warehouse already defaulted)."""

    warehouse: str
    namespace: tuple[str, ...]
    name: str

    def proto(self) -> common_pb2.TableRef:
        """The gRPC message."""
        return common_pb2.TableRef(
            warehouse=self.warehouse, namespace=list(self.namespace), name=self.name
        )


def resolve_warehouse(config: ClientConfig, warehouse: str | None) -> str:
    """The call's warehouse, else the configured default.

    Raises:
        ConfigurationError: neither was given.
    """
    chosen = warehouse or config.warehouse
    if not chosen:
        raise ConfigurationError("no warehouse: pass warehouse=... or set LAKEGATE_WAREHOUSE")
    return chosen


def auth_headers(config: ClientConfig) -> dict[str, str]:
    """Caller authentication: a bearer token when configured; always the anti-forgery header.

    The gateway refuses credential requests carrying neither (a browser or an SSRF cannot set a
    custom header), so ``X-Lakegate-Request`` is what makes a token-less local call legitimate.
    """
    headers = {"X-Lakegate-Request": "1"}
    if config.token:
        headers["Authorization"] = f"Bearer {config.token}"
    return headers


def grpc_metadata(config: ClientConfig) -> tuple[tuple[str, str], ...]:
    """The same caller authentication as gRPC metadata (keys must be lower-case)."""
    return tuple((k.lower(), v) for k, v in auth_headers(config).items())


# -- HTTP requests ------------------------------------------------------------------------------


@dataclass(frozen=True)
class HttpRequest:
    """One native-API call, independent of the HTTP library that sends it."""

    method: str
    path: str
    params: Mapping[str, str] = field(default_factory=dict)
    json: Any = None
    headers: Mapping[str, str] = field(default_factory=dict)


def _seg(value: str) -> str:
    return quote(value, safe="")


def _table_path(ref: TableRef) -> str:
    ns = _seg(_NS_SEPARATOR.join(ref.namespace))
    return f"/v1/warehouses/{_seg(ref.warehouse)}/namespaces/{ns}/tables/{_seg(ref.name)}"


def http_credentials(ref: TableRef, access: Access) -> HttpRequest:
    """GET credentials for a table."""
    return HttpRequest("GET", f"{_table_path(ref)}/credentials", {"access": access})


def http_load(ref: TableRef, vended: bool, access: Access) -> HttpRequest:
    """GET a table's metadata (and credentials when ``vended``)."""
    params = {"vended": "true", "access": access} if vended else {}
    return HttpRequest("GET", _table_path(ref), params)


def http_list(
    warehouse: str, namespace: tuple[str, ...], page_token: str | None, page_size: int | None
) -> HttpRequest:
    """GET one page of a namespace's tables."""
    ns = _seg(_NS_SEPARATOR.join(namespace))
    params: dict[str, str] = {}
    if page_token:
        params["page_token"] = page_token
    if page_size:
        params["page_size"] = str(page_size)
    return HttpRequest("GET", f"/v1/warehouses/{_seg(warehouse)}/namespaces/{ns}/tables", params)


def http_create(
    ref: TableRef,
    format: str,
    base_location: str | None,
    doc: str | None,
    properties: Mapping[str, str] | None,
    idempotency_key: str,
) -> HttpRequest:
    """POST a new generic table."""
    ns = _seg(_NS_SEPARATOR.join(ref.namespace))
    body: dict[str, Any] = {"name": ref.name, "format": format}
    if base_location:
        body["base_location"] = base_location
    if doc is not None:
        body["doc"] = doc
    if properties:
        body["properties"] = dict(properties)
    return HttpRequest(
        "POST",
        f"/v1/warehouses/{_seg(ref.warehouse)}/namespaces/{ns}/tables",
        json=body,
        headers={"Idempotency-Key": idempotency_key},
    )


def http_drop(ref: TableRef, purge: bool, force: bool) -> HttpRequest:
    """DELETE a table."""
    params = {"purge": str(purge).lower(), "force": str(force).lower()}
    return HttpRequest("DELETE", _table_path(ref), params)


def http_rename(source: TableRef, destination: TableRef) -> HttpRequest:
    """POST a rename within one warehouse."""
    body = {
        "source": {"namespace": list(source.namespace), "name": source.name},
        "destination": {"namespace": list(destination.namespace), "name": destination.name},
    }
    return HttpRequest("POST", f"/v1/warehouses/{_seg(source.warehouse)}/tables/rename", json=body)


def new_idempotency_key() -> str:
    """A fresh Idempotency-Key, so a retried create is not applied twice."""
    return str(uuid.uuid4())


# -- HTTP answers --------------------------------------------------------------------------------


def _storage_credentials(items: Sequence[Mapping[str, Any]] | None) -> list[StorageCredential]:
    result = []
    for item in items or ():
        expires = item.get("expires_at_ms") or item.get("expires-at-ms")
        result.append(
            StorageCredential(
                prefix=str(item.get("prefix", "")),
                config={str(k): str(v) for k, v in (item.get("config") or {}).items()},
                expires_at_ms=int(expires) if expires else None,
            )
        )
    return result


def credentials_from_json(
    body: Mapping[str, Any], ref: TableRef, access: Access
) -> TableCredentials:
    """A native ``CredentialsResponse`` → TableCredentials."""
    creds = _storage_credentials(body.get("credentials"))
    location = str(body.get("location") or (creds[0].prefix if creds else ""))
    return TableCredentials.from_parts(
        location=location,
        credentials=creds,
        expires_at_ms=int(body.get("expires_at_ms") or 0) or None,
        outcome=str(body.get("outcome") or ""),
        access=str(body.get("access") or access),
        warehouse_id=str(body.get("warehouse_id") or ""),
        namespace=tuple(body.get("namespace") or ref.namespace),
        table=str(body.get("table") or ref.name),
        served_remaining_s=_float_or_none(body.get("remaining_s")),
    )


def _float_or_none(value: Any) -> float | None:
    return None if value is None else float(value)


def loaded_from_json(
    body: Mapping[str, Any], ref: TableRef, access: Access, vended: bool
) -> LoadedTable:
    """A native load/create answer → LoadedTable."""
    table = body.get("table") or {}
    config = {str(k): str(v) for k, v in (body.get("config") or {}).items()}
    base_location = str(table.get("base_location") or table.get("base-location") or "")
    warehouse_id = str(body.get("warehouse_id") or "")
    creds = _storage_credentials(body.get("credentials"))
    credentials = None
    if vended and creds:
        credentials = TableCredentials.from_parts(
            location=base_location,
            credentials=creds,
            base_config=config,
            access=access,
            warehouse_id=warehouse_id,
            namespace=ref.namespace,
            table=ref.name,
        )
    return LoadedTable(
        namespace=ref.namespace,
        name=str(table.get("name") or ref.name),
        format=str(table.get("format") or ""),
        base_location=base_location,
        warehouse_id=warehouse_id,
        protected=bool(table.get("protected", False)),
        doc=table.get("doc"),
        properties={str(k): str(v) for k, v in (table.get("properties") or {}).items()},
        config=config,
        credentials=credentials,
    )


def identifiers_from_json(body: Mapping[str, Any]) -> tuple[list[TableIdentifier], str | None]:
    """A native list page → (identifiers, next page token or None)."""
    ids = [
        TableIdentifier(
            namespace=tuple(item.get("namespace") or ()),
            name=str(item.get("name", "")),
            format=str(item.get("format") or ""),
            id=str(item.get("id") or ""),
        )
        for item in body.get("identifiers") or ()
    ]
    return ids, body.get("next_page_token") or None


def error_from_http(status: int, body: bytes, headers: Mapping[str, str]) -> LakegateError:
    """A non-2xx answer → the matching LakegateError, carrying the envelope's message and type."""
    message, type_, request_id = f"gateway answered HTTP {status}", "", ""
    try:
        envelope = json.loads(body.decode("utf-8")) if body else {}
    except (UnicodeDecodeError, ValueError):
        envelope = {}
    error = envelope.get("error") if isinstance(envelope, dict) else None
    if isinstance(error, dict):
        message = str(error.get("message") or message)
        type_ = str(error.get("type") or "")
        for line in error.get("stack") or ():
            if isinstance(line, str) and line.startswith("Error ID:"):
                request_id = line.split(":", 1)[1].strip()
    cls = error_for_status(status)
    if cls is RateLimitedError:
        return RateLimitedError(
            message,
            status=status,
            type=type_,
            request_id=request_id,
            retry_after_s=_retry_after(headers.get("Retry-After") or headers.get("retry-after")),
        )
    return cls(message, status=status, type=type_, request_id=request_id)


def _retry_after(value: str | None) -> float | None:
    try:
        return float(value) if value else None
    except ValueError:
        return None


# -- gRPC ----------------------------------------------------------------------------------------

_ACCESS: dict[str, common_pb2.AccessMode] = {
    "read": common_pb2.ACCESS_MODE_READ,
    "write": common_pb2.ACCESS_MODE_WRITE,
}
_OUTCOME = {
    common_pb2.CACHE_OUTCOME_HIT: "hit",
    common_pb2.CACHE_OUTCOME_MISS: "miss",
    common_pb2.CACHE_OUTCOME_COALESCED: "coalesced",
    common_pb2.CACHE_OUTCOME_STALE: "stale",
}
_GRPC_ERRORS: dict[grpc.StatusCode, type[LakegateError]] = {
    grpc.StatusCode.INVALID_ARGUMENT: InvalidRequestError,
    grpc.StatusCode.FAILED_PRECONDITION: InvalidRequestError,
    grpc.StatusCode.OUT_OF_RANGE: InvalidRequestError,
    grpc.StatusCode.UNAUTHENTICATED: UnauthenticatedError,
    grpc.StatusCode.PERMISSION_DENIED: PermissionDeniedError,
    grpc.StatusCode.NOT_FOUND: NotFoundError,
    grpc.StatusCode.ALREADY_EXISTS: ConflictError,
    grpc.StatusCode.ABORTED: ConflictError,
    grpc.StatusCode.RESOURCE_EXHAUSTED: RateLimitedError,
    grpc.StatusCode.UNAVAILABLE: UnavailableError,
    grpc.StatusCode.INTERNAL: InternalError,
    grpc.StatusCode.UNKNOWN: InternalError,
    grpc.StatusCode.UNIMPLEMENTED: InternalError,
    grpc.StatusCode.DEADLINE_EXCEEDED: GatewayTimeoutError,
}


def access_proto(access: Access) -> common_pb2.AccessMode:
    """``read``/``write`` → the proto enum."""
    return _ACCESS[access]


def grpc_credentials_request(
    ref: TableRef, access: Access
) -> credentials_pb2.GetTableCredentialsRequest:
    """The GetTableCredentials request."""
    return credentials_pb2.GetTableCredentialsRequest(table=ref.proto(), access=_ACCESS[access])


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
    )


def loaded_from_proto(
    msg: catalog_pb2.LoadTableResponse, ref: TableRef, access: Access, vended: bool
) -> LoadedTable:
    """A LoadTableResponse → LoadedTable."""
    config = dict(msg.config)
    creds = _storage_from_proto(msg.credentials)
    credentials = None
    if vended and creds:
        credentials = TableCredentials.from_parts(
            location=msg.table.base_location,
            credentials=creds,
            base_config=config,
            access=access,
            warehouse_id=msg.warehouse_id,
            namespace=ref.namespace,
            table=ref.name,
        )
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
            retry_after = _retry_after(value)
    message = (detail.message if detail else "") or details or f"gRPC {code}"
    if detail is not None and detail.http_status:
        cls = error_for_status(detail.http_status)
        status = detail.http_status
    elif code == grpc.StatusCode.UNAVAILABLE:
        return GatewayConnectionError(
            f"cannot reach the gateway at {target}: {details or 'unavailable'}",
            type="GatewayUnreachable",
        )
    else:
        cls = _GRPC_ERRORS.get(code, LakegateError) if code else LakegateError
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


# -- the per-process memo ------------------------------------------------------------------------

MemoKey = tuple[str, str, tuple[str, ...], str, str]


def memo_key(url: str, ref: TableRef, access: Access) -> MemoKey:
    """(url, warehouse, namespace, table, access), case-folded as Lakekeeper matches names."""
    return (
        url,
        ref.warehouse.casefold(),
        tuple(p.casefold() for p in ref.namespace),
        ref.name.casefold(),
        access,
    )


class CredentialMemo:
    """Per-process memo of credentials, so a task asking in a tight loop never leaves the process.

    An entry is served only while it has more than ``floor_s`` left (the same floor the gateway
    serves with, so a memo hit is as good as a gateway answer); a credential without an expiry is
    never memoised (the gateway holds those only briefly). Bounded LRU. Thread-safe; the owner
    builds a new memo after a fork, so no lock is ever inherited in a held state.
    """

    def __init__(self, clock: Clock, floor_s: float, max_entries: int) -> None:
        self._clock = clock
        self._floor_s = floor_s
        self._max_entries = max_entries
        self._entries: OrderedDict[MemoKey, TableCredentials] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: MemoKey) -> TableCredentials | None:
        """A still-comfortable credential for ``key``, else None (and the stale entry dropped)."""
        with self._lock:
            creds = self._entries.get(key)
            if creds is None:
                return None
            remaining = creds.remaining_at(self._clock.now())
            if remaining is None or remaining <= self._floor_s:
                del self._entries[key]
                return None
            self._entries.move_to_end(key)
            return creds

    def put(self, key: MemoKey, creds: TableCredentials) -> None:
        """Remember ``creds`` if it is worth remembering."""
        remaining = creds.remaining_at(self._clock.now())
        if remaining is None or remaining <= self._floor_s:
            return
        with self._lock:
            self._entries[key] = creds
            self._entries.move_to_end(key)
            while len(self._entries) > self._max_entries:
                self._entries.popitem(last=False)

    def forget_table(self, url: str, ref: TableRef) -> None:
        access: Access
        """Drop both access modes of a table (after drop/rename through this client)."""
        with self._lock:
            for access in ("read", "write"):
                self._entries.pop(memo_key(url, ref, access), None)

    def clear(self) -> None:
        """Forget everything."""
        with self._lock:
            self._entries.clear()

    def __len__(self) -> int:
        return len(self._entries)
