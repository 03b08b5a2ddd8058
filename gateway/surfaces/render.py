"""Response rendering shared by the surfaces: JSON bodies, the error envelope, credential bodies.

The credential routes are the hot path (executors ask for the same few tables over and over),
so their bodies are pre-rendered once per served credential set (`RenderedBody`, kept in the
route match's memo) and a cache hit only splices in the per-request fields, if any.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any

from aiohttp import web

from gateway.errors import GatewayError, envelope, internal_envelope, retry_after_value
from gateway.models import CredentialLookup, Outcome, StorageCredential
from gateway.surfaces.bytes_response import BytesResponse, HttpDate


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
    """One storage credential as JSON (`expires_at_ms` on the native surface only)."""
    doc: dict[str, Any] = {"prefix": cred.prefix, "config": config_strings(cred.config)}
    if with_expiry:
        doc["expires_at_ms"] = cred.expires_at_ms
    return doc


def dumps(doc: Any) -> bytes:
    """Compact JSON bytes, as every surface sends them."""
    return json.dumps(doc, separators=(",", ":")).encode()


def json_response(
    doc: Any, status: int = 200, headers: Mapping[str, str] | None = None
) -> web.Response:
    return web.Response(body=dumps(doc), status=status, content_type="application/json",
                        headers=headers)


# The Cache-Control of an answer carrying credentials on the native and AWS surfaces.
NO_STORE = "no-store"


def json_body_response(body: bytes, date: HttpDate,
                       cache_control: str | None = None) -> BytesResponse:
    """A 200 with JSON bytes rendered beforehand, written as one prebuilt message."""
    return BytesResponse(body, date, cache_control)


def error_response(err: GatewayError, request_id: str) -> web.Response:
    """The Lakekeeper error envelope with the error's status (+ Retry-After when known)."""
    headers = {}
    retry_after = retry_after_value(err)
    if retry_after is not None:
        headers["Retry-After"] = retry_after
    return json_response(envelope(err, request_id), status=err.status, headers=headers)


def internal_error_response(request_id: str) -> web.Response:
    return json_response(internal_envelope(request_id), status=500)


def _json_number(value: float | None) -> bytes:
    """`value` exactly as json.dumps writes it (float repr; null; NaN/Infinity)."""
    if type(value) is float and math.isfinite(value):
        return float.__repr__(value).encode()
    return json.dumps(value).encode()


_COALESCED = Outcome.COALESCED  # bound once: enum class attributes are slow on 3.11
_OUTCOME_KEY = b',"outcome":'
_IDENTITY_TTL_KEY = b',"identity_ttl_s":'
_OUTCOME_JSON: dict[str, bytes] = {o.value: json.dumps(o.value).encode() for o in Outcome}


class RenderedBody:
    """A response body pre-rendered for one served credential set: the routes' one body memo.

    Everything fixed by (warehouse, table, access, credential set) is rendered once. A static
    body (`tail` None) is `head` itself; a spliced one (the native CredentialsResponse) is
    `head + remaining_s + ,"outcome": + outcome + ,"identity_ttl_s": + identity_ttl_s + tail`,
    the fields that change per request.
    A rotated credential is a new CredentialSet object: `fits()` compares identities, so it is
    re-rendered at once.

    Coalesced waiters all get the answer of one fetch, and so one set object: the first one
    answered renders it, every other waiter of that fetch is written the same bytes (its
    `remaining_s` is the first waiter's, higher by at most the time the herd takes to answer;
    `expires_at_ms` is exact). A later fetch is a new set, so a new body.
    """

    __slots__ = ("_coalesced", "_head", "_tail", "access", "credentials", "ref", "warehouse_id")

    def __init__(self, lookup: CredentialLookup, head: bytes, tail: bytes | None = None) -> None:
        self.credentials = lookup.credentials
        self.warehouse_id = lookup.warehouse.id
        self.ref = lookup.ref
        self.access = lookup.access
        self._head = head
        self._tail = tail
        self._coalesced: bytes | None = None

    def fits(self, lookup: CredentialLookup) -> bool:
        """Whether this body answers `lookup` (same set, warehouse, table and access)."""
        return (
            lookup.credentials is self.credentials
            and lookup.warehouse.id == self.warehouse_id
            and (lookup.ref is self.ref or lookup.ref == self.ref)
            and lookup.access is self.access
        )

    def splice(self, middle: bytes, end: bytes = b"") -> bytes:
        """`head + middle + tail + end`: the per-request parts encoded by the caller (gRPC's
        wire fields 5 and 6 between a GetTableCredentialsResponse's head and tail, field 9
        after it), joined in one copy."""
        return b"".join((self._head, middle, self._tail or b"", end))

    def render(self, lookup: CredentialLookup) -> bytes:
        """The body bytes for `lookup` (which `fits`)."""
        if self._tail is None:
            return self._head
        coalesced = lookup.outcome is _COALESCED
        if coalesced and self._coalesced is not None:
            return self._coalesced
        outcome = _OUTCOME_JSON.get(lookup.outcome) or json.dumps(str(lookup.outcome)).encode()
        body = b"".join((self._head, _json_number(lookup.remaining_s), _OUTCOME_KEY, outcome,
                         _IDENTITY_TTL_KEY, _json_number(lookup.identity_ttl_s), self._tail))
        if coalesced:
            self._coalesced = body
        return body
