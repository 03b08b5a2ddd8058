"""Lakekeeper's request-parsing and error rules, as the Lakekeeper-compatible surface applies them.

Checked against Lakekeeper `main` v0.13.1-78-g90892e9cc (docs/lakekeeper-fidelity.md):
- `X-Iceberg-Access-Delegation` (`api/iceberg/v1/tables.rs` `parse_data_access`): all header
  lines are merged and split on commas; values match exactly after trimming, so unknown or
  differently cased values are ignored and the server chooses (it vends). Only `client-managed`
  without `vended-credentials`/`remote-signing` means "no credentials". `remote-signing` on an
  Iceberg S3 table is answered by the node's signer (surfaces/http_signer.py), never with keys;
  on an S3 generic table without keys and without a signer (the gateway signs Iceberg only).
- Query booleans (`api/iceberg/types.rs` `deserialize_bool`): exactly `1 t T TRUE true True` /
  `0 f F FALSE false False`; anything else is 400.
- Visibility and 401 types (`service/authz`, `service/authn.rs`): a table the caller may not
  see is 404 `NoSuchGenericTableException`; 401 is `MissingAuthorizationHeader` or
  `AuthenticationFailed`.
- `Idempotency-Key` (`service/idempotency.rs`, `request_metadata.rs`): checked on every request,
  GET included: a UUID (empty is ignored), else 400 `InvalidIdempotencyKey`; two header lines
  are 400 `DuplicateIdempotencyKey`.
- `client.refresh-credentials-endpoint` (`request_metadata.rs`) must name the gateway, not the
  catalog behind it.
- `Cache-Control` (`api/router.rs` `set_cache_directives`): Lakekeeper says `private` on every
  answer; the gateway says `no-store` on an answer that carries storage keys (`carries_keys`),
  its own or passed through from the catalog: a private cache (a browser, a client library's
  HTTP cache) must not keep them either.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

from gateway.errors import (
    GatewayError,
    InvalidRequestError,
    PermissionDeniedError,
    UnauthenticatedError,
)

DELEGATION_HEADER = "X-Iceberg-Access-Delegation"
REFRESH_ENDPOINT_KEY = "client.refresh-credentials-endpoint"
# Byte strings one of which every answer carrying storage keys holds (Iceberg's and Lakekeeper's
# credential keys); a false positive only costs a cache a miss.
_KEY_MARKERS = (b"storage-credentials", b"secret-access-key", b"session-token", b"sas-token",
                b"oauth2.token", b"access-key-id")
TRUE_VALUES = frozenset({"1", "t", "T", "TRUE", "true", "True"})
FALSE_VALUES = frozenset({"0", "f", "F", "FALSE", "false", "False"})


def delegation_values(lines: list[str]) -> set[str]:
    """Every header line, split on commas and trimmed (values are case-sensitive)."""
    return {v.strip() for line in lines for v in line.split(",")}


def client_managed(lines: list[str]) -> bool:
    """Whether the header lines ask for client-managed access only (no credentials)."""
    values = delegation_values(lines)
    return "client-managed" in values and not values & {"vended-credentials", "remote-signing"}


def asks_signing(request: Any) -> bool:
    """Whether the caller's delegation header asks for `remote-signing` (it then gets no key,
    whatever else it lists)."""
    headers = request.headers
    return DELEGATION_HEADER in headers and "remote-signing" in delegation_values(
        header_lines(headers))


def idempotency_key(lines: list[str]) -> str | None:
    """The caller's Idempotency-Key, checked as Lakekeeper checks it; None when absent/empty.

    Raises:
        InvalidRequestError: two header lines, or not a UUID (400, Lakekeeper's types).
    """
    if len(lines) > 1:
        raise InvalidRequestError("Multiple Idempotency-Key headers",
                                  lakekeeper_type="DuplicateIdempotencyKey")
    raw = lines[0].strip() if lines else ""
    if not raw:
        return None
    try:
        uuid.UUID(raw)
    except ValueError:
        raise InvalidRequestError("Idempotency-Key must be a UUID",
                                  lakekeeper_type="InvalidIdempotencyKey") from None
    return raw


def lakekeeper_bool(value: str | None, what: str, default: bool | None) -> bool | None:
    """A query boolean as Lakekeeper parses it; absent -> `default`.

    Raises:
        InvalidRequestError: any other spelling, the empty string included (400).
    """
    if value is None:
        return default
    if value in TRUE_VALUES:
        return True
    if value in FALSE_VALUES:
        return False
    raise InvalidRequestError(f"{what} must be one of 1 t T TRUE true True 0 f F FALSE false False")


def lakekeeper_error(err: GatewayError, pattern: tuple[str, ...],
                     authorization: str | None) -> GatewayError:
    """`err` with Lakekeeper's status and type on the Lakekeeper-compatible routes.

    The error class is kept (metrics still count a denial as a denial); only the envelope
    `type` and, for an invisible table, the status change.
    """
    if isinstance(err, UnauthenticatedError) and err.lakekeeper_type is None:
        if not authorization:
            return UnauthenticatedError("Missing Authorization Header",
                                        lakekeeper_type="MissingAuthorizationHeader")
        return UnauthenticatedError(err.message, lakekeeper_type="AuthenticationFailed")
    if (isinstance(err, PermissionDeniedError) and err.lakekeeper_type is None
            and "{table}" in pattern and "generic-tables" in pattern):
        return PermissionDeniedError("Generic table does not exist", status=404,
                                     lakekeeper_type="NoSuchGenericTableException")
    return err


def gateway_refresh_endpoints(body: bytes, gateway_base: str) -> bytes:
    """Point every `client.refresh-credentials-endpoint` in a JSON answer at `gateway_base`.

    Lakekeeper builds the URL from the Host / X-Forwarded-* it saw (the gateway's upstream
    call), so through the gateway it would name the catalog. The path is kept: the gateway
    serves the same `/catalog/v1/...` credentials path. A body that is not a JSON object is
    returned unchanged.
    """
    if REFRESH_ENDPOINT_KEY.encode() not in body:
        return body
    try:
        doc = json.loads(body)
    except ValueError:
        return body
    if not isinstance(doc, dict):
        return body
    _rewrite(doc, gateway_base.rstrip("/"))
    return json.dumps(doc, separators=(",", ":")).encode()


def _rewrite(node: Any, base: str) -> None:
    if isinstance(node, dict):
        for key, value in node.items():
            if key == REFRESH_ENDPOINT_KEY and isinstance(value, str):
                parts = urlsplit(value)
                tail = parts.path + (f"?{parts.query}" if parts.query else "")
                node[key] = base + tail
            else:
                _rewrite(value, base)
    elif isinstance(node, list):
        for item in node:
            _rewrite(item, base)


def header_lines(headers: Mapping[str, str], name: str = DELEGATION_HEADER) -> list[str]:
    """All lines of header `name` (aiohttp's multidict `getall`; a plain mapping gives one)."""
    getall = getattr(headers, "getall", None)
    if getall is not None:
        return list(getall(name, []))
    value = headers.get(name)
    return [] if value is None else [value]


def carries_keys(body: bytes) -> bool:
    """Whether a JSON answer may carry storage keys (then it says `Cache-Control: no-store`)."""
    return any(marker in body for marker in _KEY_MARKERS)
