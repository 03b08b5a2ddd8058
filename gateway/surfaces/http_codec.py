"""HTTP request parsing shared by the HTTP surfaces: raw paths, queries, JSON bodies, headers.

Paths are decoded segment by segment from the RAW request target (never from a pre-decoded path),
so `%2F` inside a table name stays part of the name and `%1F` separates namespace levels, exactly
as Lakekeeper (axum) does. Names are checked by the one set of rules (gateway/names.py, through
`TableRef`). Every parse error is an InvalidRequestError (400), never a 500.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any
from urllib.parse import unquote

from aiohttp import web
from multidict import MultiMapping, istr

from gateway.errors import InvalidRequestError, PayloadTooLargeError
from gateway.models import (
    AccessMode,
    CallerIdentity,
    CreateTableSpec,
    RequestContext,
    Scope,
    TableRef,
    table_kind,
)
from gateway.names import NAMESPACE_SEPARATOR as NAMESPACE_SEPARATOR
from gateway.names import check_name, check_namespace, check_warehouse
from gateway.surfaces.http_routing import HttpCall
from gateway.surfaces.json_body import parse_json_object
from gateway.surfaces.lakekeeper_compat import (
    DELEGATION_HEADER,
    client_managed,
    header_lines,
    idempotency_key,
)
from gateway.surfaces.request_ids import RequestIds

_REQUEST_ID = re.compile(r"^[A-Za-z0-9._:-]{1,128}$")
# Header names read on every request, as `istr` (a case-insensitive lookup folds a plain str
# each time; see ingress.py).
_X_REQUEST_ID, _IDEMPOTENCY_KEY, _PROJECT_ID, _PROJECT_IDENT, _DELEGATION = map(istr, (
    "x-request-id", "Idempotency-Key", "x-project-id", "x-project-ident", DELEGATION_HEADER))
NameRef = tuple[tuple[str, ...], str]  # (namespace, table) inside a warehouse


def split_target(raw_target: str) -> tuple[list[str], str]:
    """Split a raw request target into raw path segments (still encoded) and the raw query."""
    path, _, query = raw_target.partition("?")
    return path.strip("/").split("/") if path.strip("/") else [], query


def decode_segment(raw: str, what: str) -> str:
    """Percent-decode one path segment strictly (UTF-8); a `warehouse` or `table` is checked
    as a name, a `namespace` is left for `parse_namespace` (its levels are the names).

    Raises:
        InvalidRequestError: undecodable, or not a valid name.
    """
    try:
        value = unquote(raw, encoding="utf-8", errors="strict")
    except UnicodeDecodeError as exc:
        raise InvalidRequestError(f"{what} is not valid UTF-8") from exc
    if what == "warehouse":
        return check_warehouse(value)
    if what != "namespace":
        check_name(value, what)
    return value


def parse_namespace(decoded: str) -> tuple[str, ...]:
    """Split a decoded namespace segment on U+001F into validated levels."""
    return check_namespace(decoded.split(NAMESPACE_SEPARATOR))


def parent_of(query: MultiMapping[str]) -> tuple[str, ...] | None:
    """The `?parent=` namespace of a namespace listing (levels joined by U+001F, as Lakekeeper
    reads it), checked; None when absent.

    Raises:
        InvalidRequestError: given twice (the policy and the catalog could read different
            ones), or not a valid namespace.
    """
    values = query.getall("parent", [])
    if not values:
        return None
    if len(values) > 1:
        raise InvalidRequestError("query parameter 'parent' given more than once")
    return check_namespace(values[0].split(NAMESPACE_SEPARATOR), "parent")


def warehouse_of(params: Mapping[str, str]) -> str:
    """The `{wh}` capture, decoded and checked."""
    return decode_segment(params["wh"], "warehouse")


def namespace_of(params: Mapping[str, str]) -> tuple[str, ...]:
    """The `{ns}` capture, decoded and split into checked levels."""
    return parse_namespace(decode_segment(params["ns"], "namespace"))


def params_scope(params: Mapping[str, str]) -> Scope | None:
    """The warehouse, namespace and table a route's captures name, as far as it names them
    (None without a warehouse); for audit and log lines of a request refused before its
    handler ran.

    Raises:
        InvalidRequestError: a capture breaks the name rules.
    """
    if "wh" not in params:
        return None
    warehouse = warehouse_of(params)
    namespace = namespace_of(params) if "ns" in params else ()
    table = decode_segment(params["table"], "table") if "table" in params else None
    return (warehouse, namespace, table)


def call_ref(call: HttpCall) -> TableRef:
    """The TableRef of a `{wh}/.../{ns}/.../{table}` target, parsed once per exact target.

    Memoized on the route match, which is cached per (method, raw target): the parse is a pure
    function of the raw path. A target that fails to parse is not memoized (it raises
    InvalidRequestError every time, after the caller was admitted).
    """
    match = call.match
    ref = match.ref
    if ref is None:
        params = match.params
        ref = match.ref = TableRef(
            warehouse=decode_segment(params["wh"], "warehouse"),
            namespace=namespace_of(params),
            name=decode_segment(params["table"], "table"),
        )
    return ref


def call_target(call: HttpCall) -> tuple[TableRef, AccessMode]:
    """(TableRef, `?access=`) of a credential request, parsed once per exact target
    (`?kind=iceberg` names an Iceberg table)."""
    match = call.match
    ref, access = match.ref, match.access
    if ref is None or access is None:  # first request for this exact target
        ref = call_ref(call)
        query = call.request.query
        if table_kind(query.get("kind")) == "iceberg":  # an Iceberg table's credentials
            ref = match.ref = replace(ref, kind="iceberg")
        access = match.access = parse_access(query.get("access"))
    return ref, access


def namespace_list(value: Any, what: str = "namespace") -> tuple[str, ...]:
    """A JSON namespace (array of strings), checked by the name rules."""
    if not isinstance(value, list):
        raise InvalidRequestError(f"{what} must be a non-empty array of strings")
    return check_namespace(value, what)


def string_field(body: Mapping[str, Any], key: str, *, required: bool = True) -> str | None:
    value = body.get(key)
    if value is None and not required:
        return None
    if not isinstance(value, str) or (required and not value):
        raise InvalidRequestError(f"'{key}' must be a non-empty string")
    return value


def required_string(body: Mapping[str, Any], key: str) -> str:
    """A required non-empty string field."""
    return str(string_field(body, key))


def string_map(body: Mapping[str, Any], key: str) -> dict[str, str] | None:
    value = body.get(key)
    if value is None:
        return None
    if not isinstance(value, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in value.items()
    ):
        raise InvalidRequestError(f"'{key}' must be an object of strings")
    return dict(value)


def rename_pair(body: Mapping[str, Any]) -> tuple[NameRef, NameRef]:
    """Parse `{"source": {namespace, name}, "destination": {...}}` (both surfaces use it)."""
    out = []
    for key in ("source", "destination"):
        part = body.get(key)
        if not isinstance(part, dict):
            raise InvalidRequestError(f"'{key}' must be an object with namespace and name")
        out.append((namespace_list(part.get("namespace"), f"{key}.namespace"),
                    check_name(required_string(part, "name"), f"{key}.name")))
    return out[0], out[1]


def create_spec(body: Mapping[str, Any], *, base_location_key: str,
                pass_extra: bool) -> CreateTableSpec:
    """A create-table body: the native surface spells `base_location`, Lakekeeper's kebab-case
    `base-location` and passes unknown keys (schema, statistics) through as `extra`."""
    spec = CreateTableSpec(
        # The same name rules as a path segment, so what can be created can be loaded.
        name=check_name(required_string(body, "name"), "table"),
        format=required_string(body, "format"),
        base_location=string_field(body, base_location_key, required=False),
        doc=string_field(body, "doc", required=False),
        properties=string_map(body, "properties"),
    )
    if not pass_extra:
        return spec
    known = {"name", "format", base_location_key, "doc", "properties"}
    return replace(spec, extra={k: v for k, v in body.items() if k not in known})


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
    """A page size query value; its bounds are the service's (one setting for all surfaces)."""
    if value is None or value == "":
        return None
    try:
        return int(value)
    except ValueError:
        raise InvalidRequestError("page size must be an integer") from None


async def read_json(request: web.BaseRequest, max_bytes: int) -> dict[str, Any]:
    """Read a JSON object body, parsed under the limits of json_body.py (the one JSON parser
    of every surface).

    Raises:
        PayloadTooLargeError: the body exceeds `max_bytes` (413).
        InvalidRequestError: not a JSON object within the limits, or a body aiohttp could not
            decode (bad chunking, a Content-Encoding that does not match the bytes) (400).
    """
    if request.content_length is not None and request.content_length > max_bytes:
        raise PayloadTooLargeError(f"request body larger than {max_bytes} bytes")
    try:
        raw = await request.read()
    except web.HTTPRequestEntityTooLarge:
        raise PayloadTooLargeError(f"request body larger than {max_bytes} bytes") from None
    except web.RequestPayloadError:  # e.g. a gzip Content-Encoding over bytes that are not gzip
        raise InvalidRequestError("request body could not be decoded") from None
    return parse_json_object(raw, max_bytes)


def request_id_of(request: web.BaseRequest, ids: RequestIds) -> str:
    """The caller's x-request-id if well-formed, else a new (UUID-shaped) id from `ids`."""
    given = request.headers.get(_X_REQUEST_ID)
    if given and _REQUEST_ID.match(given):
        return given
    return ids.new()


def context_of(request: web.BaseRequest, request_id: str,
               caller: CallerIdentity, surface: str | None = None,
               peer_key: Callable[[], str] | None = None) -> RequestContext:
    """The RequestContext passed down: ids and headers that must reach the upstream, the
    surface (the audit names it) and the connection's key (for anonymous callers)."""
    headers = request.headers
    # Most requests carry neither header: one membership test each instead of a list of lines.
    idem = (_IDEMPOTENCY_KEY in headers
            and idempotency_key(header_lines(headers, _IDEMPOTENCY_KEY))) or None
    # Positional (request_id, idempotency_key, project_id, delegation, caller, surface,
    # peer_key): a
    # NamedTuple built with keywords costs ~0.3 µs more, once per request.
    return RequestContext(
        request_id,
        idem,
        headers.get(_PROJECT_ID) or headers.get(_PROJECT_IDENT) or None,
        # Lakekeeper's parse_data_access: only client-managed-only changes what is vended.
        ("client-managed" if _DELEGATION in headers
         and client_managed(header_lines(headers)) else None),
        caller,
        surface,
        peer_key,
    )
