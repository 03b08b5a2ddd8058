"""HTTP request parsing and response rendering shared by the HTTP surfaces.

Paths are decoded segment by segment from the RAW request target (never from a pre-decoded path),
so `%2F` inside a table name stays part of the name and `%1F` separates namespace levels, exactly
as Lakekeeper (axum) does. Every parse error is an InvalidRequestError (400), never a 500.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any
from urllib.parse import unquote

from aiohttp import web

from gateway.errors import (
    GatewayError,
    InvalidRequestError,
    PayloadTooLargeError,
    envelope,
    internal_envelope,
    retry_after_value,
)
from gateway.models import AccessMode, CallerIdentity, RequestContext, StorageCredential
from gateway.surfaces.request_ids import RequestIds

NAMESPACE_SEPARATOR = "\x1f"
MAX_NAME_LEN = 255
MAX_NAMESPACE_DEPTH = 16
_REQUEST_ID = re.compile(r"^[A-Za-z0-9._:-]{1,128}$")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def split_target(raw_target: str) -> tuple[list[str], str]:
    """Split a raw request target into raw path segments (still encoded) and the raw query."""
    path, _, query = raw_target.partition("?")
    return path.strip("/").split("/") if path.strip("/") else [], query


def decode_segment(raw: str, what: str) -> str:
    """Percent-decode one path segment strictly (UTF-8) and validate it as a name.

    Raises:
        InvalidRequestError: empty, too long, undecodable or containing control characters.
    """
    try:
        value = unquote(raw, encoding="utf-8", errors="strict")
    except UnicodeDecodeError as exc:
        raise InvalidRequestError(f"{what} is not valid UTF-8") from exc
    return check_name(value, what, allow_separator=what == "namespace")


def check_name(value: str, what: str, *, allow_separator: bool = False) -> str:
    """Validate a warehouse/namespace/table name from a path or a body."""
    if not value:
        raise InvalidRequestError(f"{what} must not be empty")
    if len(value) > MAX_NAME_LEN * (MAX_NAMESPACE_DEPTH if allow_separator else 1):
        raise InvalidRequestError(f"{what} is too long")
    if value in {".", ".."}:
        # Dot segments would be normalised away in the upstream URL: a path-traversal vector.
        raise InvalidRequestError(f"{what} must not be '.' or '..'")
    probe = value.replace(NAMESPACE_SEPARATOR, "") if allow_separator else value
    if _CONTROL.search(probe):
        raise InvalidRequestError(f"{what} contains control characters")
    return value


def parse_namespace(decoded: str) -> tuple[str, ...]:
    """Split a decoded namespace segment on U+001F into validated levels."""
    parts = tuple(decoded.split(NAMESPACE_SEPARATOR))
    if len(parts) > MAX_NAMESPACE_DEPTH:
        raise InvalidRequestError("namespace is too deep")
    for part in parts:
        check_name(part, "namespace level")
    return parts


def namespace_list(value: Any, what: str = "namespace") -> tuple[str, ...]:
    """Validate a JSON namespace (array of strings)."""
    if not isinstance(value, list) or not value or len(value) > MAX_NAMESPACE_DEPTH:
        raise InvalidRequestError(f"{what} must be a non-empty array of strings")
    if not all(isinstance(p, str) for p in value):
        raise InvalidRequestError(f"{what} must be a non-empty array of strings")
    return tuple(check_name(p, f"{what} level") for p in value)


def string_field(body: Mapping[str, Any], key: str, *, required: bool = True) -> str | None:
    value = body.get(key)
    if value is None and not required:
        return None
    if not isinstance(value, str) or (required and not value):
        raise InvalidRequestError(f"'{key}' must be a non-empty string")
    return value


def string_map(body: Mapping[str, Any], key: str) -> dict[str, str] | None:
    value = body.get(key)
    if value is None:
        return None
    if not isinstance(value, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in value.items()
    ):
        raise InvalidRequestError(f"'{key}' must be an object of strings")
    return dict(value)


def parse_access(value: str | None) -> AccessMode:
    if value is None or value == "":
        return AccessMode.READ
    try:
        return AccessMode(value.lower())
    except ValueError:
        raise InvalidRequestError("access must be 'read' or 'write'") from None


def parse_bool(value: str | None, what: str, default: bool | None) -> bool | None:
    if value is None or value == "":
        return default
    lowered = value.lower()
    if lowered in {"true", "1"}:
        return True
    if lowered in {"false", "0"}:
        return False
    raise InvalidRequestError(f"{what} must be true or false")


def parse_page_size(value: str | None) -> int | None:
    if value is None or value == "":
        return None
    try:
        size = int(value)
    except ValueError:
        raise InvalidRequestError("page size must be an integer") from None
    if not 1 <= size <= 1000:
        raise InvalidRequestError("page size must be between 1 and 1000")
    return size


async def read_json(request: web.Request, max_bytes: int) -> dict[str, Any]:
    """Read a JSON object body within the size limit.

    Raises:
        PayloadTooLargeError: the body exceeds `max_bytes`.
        InvalidRequestError: the body is not a JSON object.
    """
    if request.content_length is not None and request.content_length > max_bytes:
        raise PayloadTooLargeError(f"request body larger than {max_bytes} bytes")
    try:
        raw = await request.read()
    except web.HTTPRequestEntityTooLarge:
        raise PayloadTooLargeError(f"request body larger than {max_bytes} bytes") from None
    if len(raw) > max_bytes:
        raise PayloadTooLargeError(f"request body larger than {max_bytes} bytes")
    try:
        doc = json.loads(raw)
    except (ValueError, UnicodeDecodeError):
        raise InvalidRequestError("request body is not valid JSON") from None
    if not isinstance(doc, dict):
        raise InvalidRequestError("request body must be a JSON object")
    return doc


def request_id_of(request: web.BaseRequest, ids: RequestIds) -> str:
    """The caller's x-request-id if well-formed, else a new (UUID-shaped) id from `ids`."""
    given = request.headers.get("x-request-id")
    if given and _REQUEST_ID.match(given):
        return given
    return ids.new()


def context_of(request: web.Request, request_id: str, caller: CallerIdentity) -> RequestContext:
    """The RequestContext passed down: ids and headers that must reach the upstream."""
    headers = request.headers
    return RequestContext(
        request_id=request_id,
        idempotency_key=headers.get("Idempotency-Key") or None,
        project_id=headers.get("x-project-id") or headers.get("x-project-ident") or None,
        delegation=headers.get("X-Iceberg-Access-Delegation") or None,
        caller=caller,
    )


def config_strings(config: Mapping[str, Any]) -> dict[str, str]:
    """Every config value as a JSON string (pylakekeeper rejects bools and numbers)."""
    out: dict[str, str] = {}
    for key, value in config.items():
        if isinstance(value, bool):
            out[str(key)] = "true" if value else "false"
        elif value is not None:
            out[str(key)] = str(value)
    return out


def credential_json(cred: StorageCredential, *, with_expiry: bool) -> dict[str, Any]:
    doc: dict[str, Any] = {"prefix": cred.prefix, "config": config_strings(cred.config)}
    if with_expiry:
        doc["expires_at_ms"] = cred.expires_at_ms
    return doc


def json_response(
    doc: Any, status: int = 200, headers: Mapping[str, str] | None = None
) -> web.Response:
    return web.Response(
        body=json.dumps(doc, separators=(",", ":")).encode(),
        status=status,
        content_type="application/json",
        headers=headers,
    )


def error_response(err: GatewayError, request_id: str) -> web.Response:
    """The Lakekeeper error envelope with the error's status (+ Retry-After when known)."""
    headers = {}
    retry_after = retry_after_value(err)
    if retry_after is not None:
        headers["Retry-After"] = retry_after
    return json_response(envelope(err, request_id), status=err.status, headers=headers)


def internal_error_response(request_id: str) -> web.Response:
    return json_response(internal_envelope(request_id), status=500)
