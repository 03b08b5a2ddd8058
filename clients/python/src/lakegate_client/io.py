"""Old import path of table I/O (documented in earlier READMEs); the code is in ``tables/``.

Why kept: ``lakegate_client.io.read_table`` / ``write_table`` were the documented entry points.
New code imports from :mod:`lakegate_client.tables`.
"""

from __future__ import annotations

from lakegate_client.tables import (
    TableFormatError,
    TableInfo,
    describe_table,
    ensure_table,
    read_table,
    write_table,
)

__all__ = [
    "TableFormatError",
    "TableInfo",
    "describe_table",
    "ensure_table",
    "read_table",
    "write_table",
]
