"""The catalog side of table I/O: a generic table's format and location, created on demand.

Why separate: Spark's driver and the whole-table helpers both need "which format, where" before
touching storage; this module never imports pyarrow.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from lakegate_client._errors import ConflictError, LakegateError, NotFoundError

if TYPE_CHECKING:
    from lakegate_client._client import Client
    from lakegate_client._models import LoadedTable

__all__ = [
    "DIRECTORY_FORMATS",
    "FORMATS",
    "SUFFIXES",
    "TableFormatError",
    "TableInfo",
    "check_format",
    "describe_table",
    "ensure_table",
    "namespace_parts",
    "split_table_name",
]

FORMATS: tuple[str, ...] = ("parquet", "csv", "json", "lance", "delta")
DIRECTORY_FORMATS: tuple[str, ...] = ("parquet", "csv", "json")
SUFFIXES: dict[str, tuple[str, ...]] = {
    "parquet": (".parquet",),
    "csv": (".csv",),
    "json": (".json", ".jsonl", ".ndjson"),
}
class TableFormatError(LakegateError, ValueError):
    """The table's format is unknown, or the operation is not supported for it."""


@dataclass(frozen=True)
class TableInfo:
    """What the catalog says about a generic table: enough to find and decode its data."""

    namespace: tuple[str, ...]
    name: str
    format: str
    location: str


def split_table_name(name: str) -> tuple[tuple[str, ...], str]:
    """``"a.b.table"`` → ``(("a", "b"), "table")``: the last dotted part is the table."""
    parts = name.split(".")
    if len(parts) < 2 or not all(parts):
        raise ValueError(f"table name must look like 'namespace.table', got {name!r}")
    return tuple(parts[:-1]), parts[-1]


def namespace_parts(namespace: str | Sequence[str]) -> tuple[str, ...]:
    """``"a.b"`` or ``["a", "b"]`` → ``("a", "b")`` (the client's rule: dots separate levels)."""
    return tuple(namespace.split(".")) if isinstance(namespace, str) else tuple(namespace)


def check_format(fmt: str) -> str:
    """Normalise a format name and refuse the ones this module cannot decode."""
    normalised = fmt.strip().lower()
    if normalised not in FORMATS:
        raise TableFormatError(f"unsupported table format {fmt!r}; supported: {', '.join(FORMATS)}")
    return normalised


def describe_table(
    client: Client, namespace: str | Sequence[str], table: str, *, warehouse: str | None = None
) -> TableInfo:
    """Load the table's metadata (no credentials) from the gateway."""
    ns = namespace_parts(namespace)
    loaded = client.load(list(ns), table, warehouse=warehouse)
    return _table_info(ns, table, loaded)


def ensure_table(
    client: Client,
    namespace: str | Sequence[str],
    table: str,
    *,
    fmt: str | None,
    create: bool,
    warehouse: str | None = None,
    on_create: Callable[[TableInfo], object] | None = None,
) -> TableInfo:
    """Describe the table, creating it (catalog-assigned location) when asked and missing;
    ``on_create`` is told of a table this call created (not of one a rival created first)."""
    ns = namespace_parts(namespace)
    try:
        info = describe_table(client, ns, table, warehouse=warehouse)
    except NotFoundError:
        if not create:
            raise
        if fmt is None:
            raise TableFormatError("creating a table needs a format") from None
        try:
            created = client.create(list(ns), table, format=check_format(fmt), warehouse=warehouse)
        except ConflictError:  # another writer created it first: use theirs
            return ensure_table(client, ns, table, fmt=fmt, create=False, warehouse=warehouse)
        info = _table_info(ns, table, created)
        if on_create is not None:
            on_create(info)
        return info
    if fmt is not None and check_format(fmt) != info.format:
        raise TableFormatError(
            f"table {'.'.join(ns)}.{table} has format {info.format!r}, not {fmt!r}"
        )
    return info


def _table_info(ns: tuple[str, ...], table: str, loaded: LoadedTable) -> TableInfo:
    """Pick format and base location out of the client's load/create answer."""
    fmt, location = loaded.format, loaded.base_location
    if not fmt or not location:
        raise TableFormatError(f"the catalog gave no format/location for {'.'.join(ns)}.{table}")
    return TableInfo(
        namespace=ns, name=table, format=check_format(str(fmt)), location=str(location)
    )
