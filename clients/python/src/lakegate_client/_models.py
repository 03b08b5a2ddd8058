"""Frozen value types the client returns (besides TableCredentials): table identity and metadata."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal, TypeVar

from lakegate_client._errors import ConfigurationError

if TYPE_CHECKING:
    from lakegate_client.credentials import TableCredentials

__all__ = [
    "Access",
    "LoadedTable",
    "Namespace",
    "TableIdentifier",
    "TableKind",
    "TableRef",
    "TableSpec",
    "normalize_namespace",
]

Access = Literal["read", "write"]
# "generic": a Lakekeeper generic table; "iceberg": an Iceberg table of the same catalog.
TableKind = Literal["generic", "iceberg"]
Namespace = str | Sequence[str]
_Option = TypeVar("_Option", bound=str)


def normalize_namespace(namespace: Namespace) -> tuple[str, ...]:
    """``"a.b"`` or ``["a", "b"]`` → ``("a", "b")``.

    A dotted string is split on ``.`` (the usual way to write a nested namespace); pass a list to
    name a level that itself contains a dot.

    Raises:
        ConfigurationError: the namespace is empty or has an empty level.
    """
    parts = tuple(namespace.split(".")) if isinstance(namespace, str) else tuple(namespace)
    if not parts or any(not isinstance(p, str) or not p for p in parts):
        raise ConfigurationError(f"invalid namespace {namespace!r}")
    return parts


def _one_of(value: str, allowed: tuple[_Option, ...], what: str) -> _Option:
    """`value` as one of the `allowed` literals, else a ConfigurationError naming them."""
    for option in allowed:
        if value == option:
            return option
    names = " or ".join(repr(option) for option in allowed)
    raise ConfigurationError(f"{what} must be {names}, not {value!r}")


def check_access(access: str) -> Access:
    """Validate an access mode string."""
    return _one_of(access, ("read", "write"), "access")


def check_kind(kind: str) -> TableKind:
    """Validate a table kind string."""
    return _one_of(kind, ("generic", "iceberg"), "kind")


@dataclass(frozen=True)
class TableRef:
    """A fully resolved table reference (warehouse already defaulted)."""

    warehouse: str
    namespace: tuple[str, ...]
    name: str
    kind: TableKind = "generic"


@dataclass(frozen=True)
class TableSpec:
    """What creating a generic table asks for besides its name."""

    format: str
    base_location: str | None = None
    doc: str | None = None
    properties: Mapping[str, str] | None = None


@dataclass(frozen=True)
class TableIdentifier:
    """One entry of a table listing."""

    namespace: tuple[str, ...]
    name: str
    format: str = ""
    id: str = ""


@dataclass(frozen=True)
class LoadedTable:
    """A generic table's metadata as the gateway loaded it.

    Attributes:
        credentials: vended credentials when loaded with ``vended=True``, else None.
    """

    namespace: tuple[str, ...]
    name: str
    format: str
    base_location: str
    warehouse_id: str = ""
    protected: bool = False
    doc: str | None = None
    properties: dict[str, str] = field(default_factory=dict)
    config: dict[str, str] = field(default_factory=dict, repr=False)
    credentials: TableCredentials | None = field(default=None, repr=False)
