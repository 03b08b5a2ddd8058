"""The one set of name rules: what a warehouse, namespace or table name may be, on every surface.

`models.TableRef` validates through these on construction, so a name that reaches the service
was checked once, by the same rules, whichever surface (native, Lakekeeper, AWS, gRPC) it came
through, and create accepts exactly the names load accepts.

The rules follow Lakekeeper (lakekeeper `server/namespace.rs` `validate_namespace_ident`,
`server/generic_tables/create.rs`), plus limits that keep hostile input out of upstream URLs:

- every name or level: 1..255 characters, no control characters (C0 and DEL), not `.` or `..`
  (dot segments would be normalised away in an upstream URL: a path-traversal vector);
- a namespace: 1..5 levels (Lakekeeper's `MAX_NAMESPACE_DEPTH`), no `.` inside a level
  (Lakekeeper's `NamespacePartContainsDot`);
- a warehouse (name or UUID, Lakekeeper's `{prefix}` segment): no `/`;
- a generic table name may hold `/` and spaces (Lakekeeper takes the `{table}` segment as-is
  after percent-decoding); a `+` is left for Lakekeeper to refuse at create, so the gateway never
  rejects a name the catalog accepts.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterable

from gateway.errors import InvalidRequestError

NAMESPACE_SEPARATOR = "\x1f"  # Lakekeeper joins namespace levels with 0x1F (%1F in a path)
MAX_NAME_LEN = 255
MAX_NAMESPACE_DEPTH = 5
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def check_name(value: object, what: str) -> str:
    """A warehouse, namespace level or table name under the shared rules.

    Args:
        value: the candidate (anything: bodies and protobufs are untrusted).
        what: how the error message names it ("table", "namespace level", ...).

    Returns:
        `value`, unchanged.

    Raises:
        InvalidRequestError: not a string, empty, too long, `.`/`..`, or with control characters.
    """
    if not isinstance(value, str) or not value:
        raise InvalidRequestError(f"{what} must be a non-empty string")
    if len(value) > MAX_NAME_LEN:
        raise InvalidRequestError(f"{what} is too long (at most {MAX_NAME_LEN} characters)")
    if value in {".", ".."}:
        raise InvalidRequestError(f"{what} must not be '.' or '..'")
    if _CONTROL.search(value):
        raise InvalidRequestError(f"{what} contains control characters")
    return value


def check_warehouse(value: object) -> str:
    """A warehouse name or UUID: a name without `/` (it is the upstream `{prefix}` segment).

    Raises:
        InvalidRequestError: as `check_name`, or with a `/`.
    """
    name = check_name(value, "warehouse")
    if "/" in name:
        raise InvalidRequestError("warehouse must not contain '/'")
    return name


def check_namespace(levels: Iterable[object], what: str = "namespace") -> tuple[str, ...]:
    """1..5 levels, each a name without `.` (Lakekeeper's namespace rules).

    Raises:
        InvalidRequestError: empty, too deep, or a level that breaks the rules.
    """
    parts = tuple(levels)
    if not parts or len(parts) > MAX_NAMESPACE_DEPTH:
        raise InvalidRequestError(f"{what} must have between 1 and {MAX_NAMESPACE_DEPTH} levels")
    checked = tuple(check_name(part, f"{what} level") for part in parts)
    if any("." in part for part in checked):
        raise InvalidRequestError(f"{what} levels must not contain '.'")
    return checked


def split_namespace(segment: str) -> tuple[str, ...]:
    """A decoded `{namespace}` path segment → its levels (0x1F-separated; `.` is NOT one).

    Raises:
        ValueError: an empty namespace or an empty level.
    """
    parts = tuple(segment.split(NAMESPACE_SEPARATOR))
    if not segment or any(p == "" for p in parts):
        raise ValueError("namespace levels must be non-empty")
    return parts


def join_namespace(parts: Iterable[str]) -> str:
    """Namespace levels → the (not yet percent-encoded) `{namespace}` path segment."""
    return NAMESPACE_SEPARATOR.join(parts)


def is_uuid(value: str) -> bool:
    """A canonical (36-character) UUID: Lakekeeper's warehouse `{prefix}`."""
    try:
        uuid.UUID(value)
    except ValueError:
        return False
    return len(value) == 36
