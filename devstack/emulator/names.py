"""Identifier rules of Lakekeeper: namespace path decoding, name and format validation, case keys.

Sources (Lakekeeper's REST catalog and generic-table OpenAPI specs, docs/docs/api/ in
https://github.com/lakekeeper/lakekeeper): namespace levels are one path segment joined by
0x1F (`%1F`), every `+` in a level becomes a space, depth <= 5, no empty level, no `.` in a
level, no `+` at creation, reserved top-level names; names compare case-insensitively but keep
their case.
"""

from __future__ import annotations

import re
import unicodedata

from devstack.emulator.errors import ApiError

NAMESPACE_SEPARATOR = "\x1f"
MAX_NAMESPACE_DEPTH = 5
RESERVED_NAMESPACES = frozenset({"system", "examples"})
_FORMAT_RE = re.compile(r"^[a-z][a-z0-9_-]*$")
MAX_FORMAT_LEN = 64


def decode_namespace_segment(segment: str) -> list[str]:
    """Split an already percent-decoded `{namespace}` path segment into levels."""
    return [part.replace("+", " ") for part in segment.split(NAMESPACE_SEPARATOR)]


def validate_namespace(parts: list[str], *, creating: bool = False) -> None:
    """Raise 400 for a namespace Lakekeeper would refuse."""
    if not parts:
        raise ApiError(400, "NamespaceEmpty", "Namespace must not be empty")
    if len(parts) > MAX_NAMESPACE_DEPTH:
        raise ApiError(
            400,
            "NamespaceDepthExceeded",
            f"Namespace exceeds maximum depth of {MAX_NAMESPACE_DEPTH}",
        )
    for part in parts:
        if part == "":
            raise ApiError(400, "NamespacePartEmpty", "Namespace parts cannot be empty")
        if "." in part:
            raise ApiError(400, "NamespacePartContainsDot", "Namespace parts cannot contain '.'")
        if creating and "+" in part:
            raise ApiError(400, "InvalidNamespace", "Namespace parts cannot contain '+'")
    if creating and parts[0].casefold() in RESERVED_NAMESPACES:
        raise ApiError(400, "ReservedNamespace", f"Namespace '{parts[0]}' is reserved")


def validate_table_name(name: str) -> None:
    """Generic-table names: non-empty, no `+` (400 InvalidName)."""
    if name == "":
        raise ApiError(400, "InvalidName", "Generic table name must not be empty")
    if "+" in name:
        raise ApiError(400, "InvalidName", "Generic table name must not contain '+'")


def validate_format(fmt: str) -> str:
    """Trimmed format matching `^[a-z][a-z0-9_-]*$` and <= 64 chars, else 400 InvalidFormat."""
    trimmed = fmt.strip()
    if len(trimmed) > MAX_FORMAT_LEN or not _FORMAT_RE.match(trimmed):
        raise ApiError(
            400,
            "InvalidFormat",
            "Generic table format must match ^[a-z][a-z0-9_-]*$ and be at most 64 characters",
        )
    return trimmed


def fold(name: str) -> str:
    """Case key for case-insensitive, case-preserving names: NFKC case fold, as Lakekeeper's
    ICU level-2 collation also equates compatibility forms (full-width letters, ligatures)."""
    return unicodedata.normalize("NFKC", unicodedata.normalize("NFKC", name).casefold())


def namespace_key(parts: list[str]) -> str:
    """Case-folded unique key of a namespace path."""
    return NAMESPACE_SEPARATOR.join(fold(p) for p in parts)
