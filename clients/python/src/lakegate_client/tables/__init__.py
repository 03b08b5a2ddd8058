"""Table I/O: read and write a Lakekeeper generic table as Arrow, credentials from the gateway.

Why: a user (or a Spark task) should name a table and get data, never remap catalog keys to an
engine's option names by hand.

Formats:

- ``parquet``, ``csv``, ``json`` (JSON lines): a *directory table*, plain data files under the
  table's base location that any engine can list (``directory.py``; older Lakegate tables in
  ``snapshot.py``), read and written with ``pyarrow``.
- ``delta``: a Delta Lake table at the base location (``deltalake``).
- ``lance``: a Lance dataset at the base location (``pylance``).
"""

from __future__ import annotations

from lakegate_client.tables.catalog import (
    DIRECTORY_FORMATS,
    FORMATS,
    TableFormatError,
    TableInfo,
    check_format,
    describe_table,
    ensure_table,
    split_table_name,
)
from lakegate_client.tables.readwrite import Mode, arrow_dataset, read_table, write_table

__all__ = [
    "DIRECTORY_FORMATS",
    "FORMATS",
    "Mode",
    "TableFormatError",
    "TableInfo",
    "arrow_dataset",
    "check_format",
    "describe_table",
    "ensure_table",
    "read_table",
    "split_table_name",
    "write_table",
]
