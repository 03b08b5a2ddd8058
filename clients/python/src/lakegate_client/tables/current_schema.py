"""A generic table's schema as its data says it (the catalog stores none), or None when the
table has no data yet.

Why its own module: the Spark reader plans with it, and every write checks against it at
planning (``schema_fit.py``); both need "no data yet" told apart from a failure.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from lakegate_client.tables.catalog import DIRECTORY_FORMATS, TableFormatError
from lakegate_client.tables.directory import fs_path
from lakegate_client.tables.files import read_file
from lakegate_client.tables.snapshot import current_snapshot

if TYPE_CHECKING:
    import pyarrow as pa

    from lakegate_client.credentials import TableCredentials

__all__ = ["table_schema"]


def table_schema(fmt: str, creds: TableCredentials) -> pa.Schema | None:
    """The schema of the table at ``creds.location``: Lance's dataset schema, the Delta log's
    metadata, or a plain table's first current file's; None when there is no dataset, no Delta
    log or no data file yet."""
    import pyarrow as pa

    if fmt == "lance":
        import lance

        try:
            dataset = lance.dataset(creds.location, storage_options=creds.lance_storage_options())
        except (ValueError, OSError):  # no dataset yet: lance reports "not found" as one of these
            return None
        schema: pa.Schema = dataset.schema
        return schema
    if fmt == "delta":
        from deltalake import DeltaTable
        from deltalake.exceptions import TableNotFoundError

        try:
            delta = DeltaTable(creds.location, storage_options=creds.delta_storage_options())
        except TableNotFoundError:  # no Delta log yet (any other failure raises)
            return None
        return pa.schema(delta.schema().to_arrow())
    if fmt not in DIRECTORY_FORMATS:
        raise TableFormatError(f"{fmt!r} is not a generic table format")
    fs, root = creds.pyarrow_filesystem(), fs_path(creds.location)
    snapshot = current_snapshot(fs, root, fmt)
    if not snapshot.files:
        return None
    if fmt == "parquet":
        import pyarrow.parquet as pq

        return pq.read_schema(f"{root}/{snapshot.files[0]}", filesystem=fs)
    return read_file(fs, f"{root}/{snapshot.files[0]}", fmt).schema
