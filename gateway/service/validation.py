"""Name checks done before any I/O, so bad input is a clear 400 and never reaches the catalog."""

from __future__ import annotations

import uuid

from gateway.errors import InvalidRequestError
from gateway.models import TableRef

MAX_NAME_LEN = 1024
MAX_NAMESPACE_DEPTH = 16


def is_uuid(value: str) -> bool:
    """A canonical (36-character) UUID: Lakekeeper's warehouse `{prefix}`."""
    try:
        uuid.UUID(value)
    except ValueError:
        return False
    return len(value) == 36


def check_name(what: str, value: str) -> None:
    """A table (or warehouse) name Lakekeeper could hold.

    Generic table names may contain `/` and spaces: Lakekeeper rejects only an empty name or `+`
    at create, and takes the `{table}` path segment as-is after percent-decoding
    (`generic_tables/mod.rs`); the upstream client encodes every segment with `quote(safe="")`.
    A `+` is left for Lakekeeper to refuse, so the gateway never rejects what the catalog accepts.

    Raises:
        InvalidRequestError: empty, too long, or with NUL.
    """
    if not value or len(value) > MAX_NAME_LEN or "\x00" in value:
        raise InvalidRequestError(f"invalid {what} name")


def check_warehouse(value: str) -> None:
    """A warehouse name or UUID: a table name's rules, and no `/` (it is the `{prefix}` segment).

    Raises:
        InvalidRequestError: empty, too long, or with NUL or `/`.
    """
    check_name("warehouse", value)
    if "/" in value:
        raise InvalidRequestError("invalid warehouse name")


def validate_namespace(namespace: tuple[str, ...]) -> None:
    """1..16 non-empty levels without the 0x1F separator or NUL."""
    if not namespace or len(namespace) > MAX_NAMESPACE_DEPTH:
        raise InvalidRequestError("invalid namespace: between 1 and 16 levels are required")
    for part in namespace:
        if not part or len(part) > MAX_NAME_LEN or "\x1f" in part or "\x00" in part:
            raise InvalidRequestError("invalid namespace level")


def validate_ref(ref: TableRef) -> None:
    """Reject names Lakekeeper could never hold, before any I/O (clear 400, not a 404)."""
    check_warehouse(ref.warehouse)
    validate_namespace(ref.namespace)
    check_name("table", ref.name)
