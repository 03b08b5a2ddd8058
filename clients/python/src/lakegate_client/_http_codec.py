"""The HTTP codec (sans-IO): native HTTP API requests, JSON answers → the client's value types,
and the Lakekeeper error envelope → the ``LakegateError`` tree. Nothing here does I/O.

``_proto.py`` is the gRPC side of the same job; ``_ops.py`` pairs the two per operation.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

from lakegate_client._errors import (
    LakegateError,
    RateLimitedError,
    error_for_status,
)
from lakegate_client._models import Access, LoadedTable, TableIdentifier, TableRef, TableSpec
from lakegate_client.credentials import StorageCredential, TableCredentials

__all__ = ["HttpRequest", "error_from_http", "retry_after_seconds"]

_NS_SEPARATOR = "\x1f"  # Lakekeeper joins namespace levels with U+001F, sent as %1F


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


def http_credentials(ref: TableRef, access: Access, expected_location: str | None = None,
                     table_id: str | None = None) -> HttpRequest:
    """GET credentials for a table (for the expected identity, when one is named)."""
    params: dict[str, str] = {"access": access}
    if ref.kind == "iceberg":
        params["kind"] = "iceberg"
    if expected_location:
        params["expected_location"] = expected_location
    if table_id:
        params["table_id"] = table_id
    return HttpRequest("GET", f"{_table_path(ref)}/credentials", params)


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


def http_create(ref: TableRef, spec: TableSpec, idempotency_key: str) -> HttpRequest:
    """POST a new generic table."""
    ns = _seg(_NS_SEPARATOR.join(ref.namespace))
    body: dict[str, Any] = {"name": ref.name, "format": spec.format}
    if spec.base_location:
        body["base_location"] = spec.base_location
    if spec.doc is not None:
        body["doc"] = spec.doc
    if spec.properties:
        body["properties"] = dict(spec.properties)
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


# -- HTTP answers --------------------------------------------------------------------------------


def vended_credentials(
    ref: TableRef,
    access: Access,
    location: str,
    creds: Sequence[StorageCredential],
    config: Mapping[str, str],
    warehouse_id: str,
) -> TableCredentials | None:
    """The credentials a load answer vended (HTTP or gRPC), or None when it vended none."""
    if not creds:
        return None
    return TableCredentials.from_parts(
        location=location,
        credentials=creds,
        base_config=config,
        access=access,
        warehouse_id=warehouse_id,
        namespace=ref.namespace,
        table=ref.name,
    )


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
        table_id=str(body.get("table_id") or "") or None,
        identity_ttl_s=_float_or_none(body.get("identity_ttl_s")),
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
    if vended:
        credentials = vended_credentials(ref, access, base_location, creds, config, warehouse_id)
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
    cls = error_for_status(status, type_)
    if cls is RateLimitedError:
        return RateLimitedError(
            message,
            status=status,
            type=type_,
            request_id=request_id,
            retry_after_s=retry_after_seconds(
                headers.get("Retry-After") or headers.get("retry-after")
            ),
        )
    return cls(message, status=status, type=type_, request_id=request_id)


def retry_after_seconds(value: str | None) -> float | None:
    """A ``Retry-After`` value in seconds (the HTTP-date form is not used by the gateway)."""
    try:
        return float(value) if value else None
    except ValueError:
        return None
