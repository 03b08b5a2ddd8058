"""Read or write a whole generic table as Arrow, whatever its format.

Each format uses the matching adapter of ``TableCredentials``: directory tables through
``creds.pyarrow_filesystem()``, Delta through ``delta_storage_options()``, Lance through
``lance_storage_options()``.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import TYPE_CHECKING, Literal

from lakegate_client.tables.catalog import (
    DIRECTORY_FORMATS,
    TableInfo,
    describe_table,
    ensure_table,
)
from lakegate_client.tables.directory import commit_files, current_snapshot, fs_path, new_data_file
from lakegate_client.tables.files import read_file, write_file

if TYPE_CHECKING:
    import pyarrow as pa

    from lakegate_client._client import Client
    from lakegate_client.credentials import TableCredentials

__all__ = ["Mode", "read_table", "write_table"]

Mode = Literal["append", "overwrite"]


def read_table(
    client: Client,
    namespace: str | Sequence[str],
    table: str,
    *,
    warehouse: str | None = None,
    columns: Sequence[str] | None = None,
) -> pa.Table:
    """Read a whole generic table as one Arrow table, whatever its format."""
    import pyarrow as pa

    info = describe_table(client, namespace, table, warehouse=warehouse)
    creds = client.credentials(list(info.namespace), table, warehouse=warehouse, access="read")
    cols = list(columns) if columns is not None else None
    if info.format == "delta":
        from deltalake import DeltaTable

        delta = DeltaTable(creds.location, storage_options=creds.delta_storage_options())
        return delta.to_pyarrow_table(columns=cols)
    if info.format == "lance":
        import lance

        return lance.dataset(
            creds.location, storage_options=creds.lance_storage_options()
        ).to_table(columns=cols)
    fs, root = creds.pyarrow_filesystem(), fs_path(creds.location)
    snapshot = current_snapshot(fs, root, info.format)
    parts = [read_file(fs, f"{root}/{rel}", info.format) for rel in snapshot.files]
    if not parts:
        return pa.table({})
    merged = pa.concat_tables(parts, promote_options="default")
    return merged.select(cols) if cols is not None else merged


def write_table(
    client: Client,
    namespace: str | Sequence[str],
    table: str,
    data: pa.Table | Sequence[pa.Table],
    *,
    warehouse: str | None = None,
    format: str | None = None,
    mode: Mode = "append",
    create: bool = False,
) -> TableInfo:
    """Write Arrow data to a generic table (creating it in the catalog when asked).

    ``data`` may be several tables: a directory table then gets one file per table, published by
    one commit (a multi-file drop lands atomically); Delta and Lance get their concatenation.
    """
    import pyarrow as pa

    if mode not in ("append", "overwrite"):
        raise ValueError(f"mode must be 'append' or 'overwrite', got {mode!r}")
    parts = [data] if isinstance(data, pa.Table) else list(data)
    if not parts:
        raise ValueError("nothing to write")
    info = ensure_table(client, namespace, table, fmt=format, create=create, warehouse=warehouse)
    creds = client.credentials(list(info.namespace), table, warehouse=warehouse, access="write")
    if info.format in DIRECTORY_FORMATS:
        fs, root = creds.pyarrow_filesystem(), fs_path(creds.location)
        write_id = uuid.uuid4().hex
        files = [new_data_file(write_id, i, info.format) for i in range(len(parts))]
        for rel, part in zip(files, parts, strict=True):
            write_file(fs, f"{root}/{rel}", part, info.format)
        commit_files(fs, root, info.format, files, overwrite=mode == "overwrite", write_id=write_id)
        return info
    merged = pa.concat_tables(parts, promote_options="default")
    if info.format == "delta":
        from deltalake import write_deltalake

        write_deltalake(
            creds.location, merged, mode=mode, storage_options=creds.delta_storage_options()
        )
    else:
        _write_lance(creds, merged, mode)
    return info


def _write_lance(creds: TableCredentials, data: pa.Table, mode: Mode) -> None:
    import lance

    options = creds.lance_storage_options()
    try:
        lance.dataset(creds.location, storage_options=options)
    except (ValueError, OSError):  # no dataset yet: lance reports "not found" as one of these
        lance.write_dataset(data, creds.location, mode="create", storage_options=options)
        return
    lance.write_dataset(data, creds.location, mode=mode, storage_options=options)
