"""The emulator's Iceberg table rows in SQLite (one row per live table).

Lakekeeper keeps each table's current metadata in its database and the metadata file in storage;
so does the emulator: `metadata_json` is the catalog's copy of the file at `metadata_location`
(which is really written to S3 by `iceberg_meta`). The pointer moves only through
`swap_metadata`, a compare-and-set on the previous location, so a commit that lost a race can
never overwrite a newer one. A separate connection on the same database file as `Store`, so the
generic-table store stays untouched; with `:memory:` the two are separate in-memory databases.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from pathlib import Path

from devstack.emulator.models import Namespace
from devstack.emulator.names import fold
from devstack.emulator.pagination import Cursor
from devstack.emulator.store import (
    ConflictError,
    keyset_page,
    location_overlaps,
    move_table_row,
    now_us,
)

_SCHEMA = """
CREATE TABLE IF NOT EXISTS iceberg_tables (
  id TEXT PRIMARY KEY, warehouse_id TEXT NOT NULL, namespace_id TEXT NOT NULL,
  name TEXT NOT NULL, name_key TEXT NOT NULL, location TEXT NOT NULL,
  metadata_location TEXT NOT NULL, metadata_json TEXT NOT NULL, created_at INTEGER NOT NULL,
  UNIQUE (namespace_id, name_key));
CREATE INDEX IF NOT EXISTS ice_list ON iceberg_tables (namespace_id, created_at, id);
"""


@dataclass(frozen=True)
class IcebergTable:
    id: str
    warehouse_id: str
    namespace_id: str
    name: str
    location: str
    metadata_location: str
    metadata_json: str
    created_at_us: int


# The columns of an `IcebergTable`, in its field order: `IcebergTable(*row)` builds one.
_SELECT = (
    "SELECT id, warehouse_id, namespace_id, name, location, metadata_location, metadata_json,"
    " created_at FROM iceberg_tables"
)


def _row(row: sqlite3.Row) -> IcebergTable:
    return IcebergTable(*row)


class IcebergStore:
    """Iceberg table rows; queries are small indexed statements run on the event loop."""

    def __init__(self, path: Path | str) -> None:
        self._db = sqlite3.connect(str(path), isolation_level=None, check_same_thread=False)
        self._db.row_factory = sqlite3.Row
        if str(path) != ":memory:":
            self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA busy_timeout=2000")
        self._db.executescript(_SCHEMA)

    def close(self) -> None:
        self._db.close()

    def create(
        self,
        *,
        table_id: str,
        ns: Namespace,
        name: str,
        location: str,
        metadata_location: str,
        metadata_json: str,
    ) -> IcebergTable:
        created = now_us()
        try:
            self._db.execute(
                "INSERT INTO iceberg_tables (id, warehouse_id, namespace_id, name, name_key,"
                " location, metadata_location, metadata_json, created_at)"
                " VALUES (?,?,?,?,?,?,?,?,?)",
                (
                    table_id,
                    ns.warehouse_id,
                    ns.id,
                    name,
                    fold(name),
                    location,
                    metadata_location,
                    metadata_json,
                    created,
                ),
            )
        except sqlite3.IntegrityError as exc:
            raise ConflictError(name) from exc
        return IcebergTable(
            table_id,
            ns.warehouse_id,
            ns.id,
            name,
            location,
            metadata_location,
            metadata_json,
            created,
        )

    def get(self, ns: Namespace, name: str) -> IcebergTable | None:
        row = self._db.execute(
            f"{_SELECT} WHERE namespace_id = ? AND name_key = ?", (ns.id, fold(name))
        ).fetchone()
        return _row(row) if row else None

    def get_by_id(self, table_id: str) -> IcebergTable | None:
        row = self._db.execute(f"{_SELECT} WHERE id = ?", (table_id,)).fetchone()
        return _row(row) if row else None

    def list(self, ns: Namespace, after: Cursor | None, limit: int) -> list[IcebergTable]:
        rows = keyset_page(self._db, f"{_SELECT} WHERE namespace_id = ?", [ns.id], after, limit)
        return [_row(r) for r in rows]

    def covering(self, warehouse_id: str, location: str) -> list[IcebergTable]:
        """The tables whose location equals or contains `location` (the signer's lookup)."""
        rows = self._db.execute(
            f"{_SELECT} WHERE warehouse_id = ? AND (location = ?"
            " OR substr(?, 1, length(location) + 1) = location || '/')",
            (warehouse_id, location, location),
        ).fetchall()
        return [_row(r) for r in rows]

    def location_taken(self, warehouse_id: str, location: str) -> bool:
        """True if `location` equals, contains or lies inside another Iceberg table's."""
        return location_overlaps(self._db, "iceberg_tables", "location", warehouse_id, location)

    def swap_metadata(
        self, table_id: str, expected_location: str, new_location: str, metadata_json: str
    ) -> bool:
        """Move the pointer iff it still is `expected_location` (False: a newer commit won)."""
        cur = self._db.execute(
            "UPDATE iceberg_tables SET metadata_location = ?, metadata_json = ?"
            " WHERE id = ? AND metadata_location = ?",
            (new_location, metadata_json, table_id, expected_location),
        )
        return cur.rowcount == 1

    def has_tables(self, ns: Namespace) -> bool:
        row = self._db.execute(
            "SELECT 1 FROM iceberg_tables WHERE namespace_id = ? LIMIT 1", (ns.id,)
        ).fetchone()
        return row is not None

    def namespace_ids(self, warehouse_id: str) -> list[str]:
        """The namespaces of a warehouse that hold Iceberg tables."""
        rows = self._db.execute(
            "SELECT DISTINCT namespace_id FROM iceberg_tables WHERE warehouse_id = ?",
            (warehouse_id,),
        ).fetchall()
        return [r["namespace_id"] for r in rows]

    def delete_namespace_tables(self, namespace_id: str) -> None:
        self._db.execute("DELETE FROM iceberg_tables WHERE namespace_id = ?", (namespace_id,))

    def delete(self, table_id: str) -> None:
        self._db.execute("DELETE FROM iceberg_tables WHERE id = ?", (table_id,))

    def rename(self, table_id: str, ns: Namespace, new_name: str) -> None:
        move_table_row(self._db, "iceberg_tables", table_id, ns, new_name)
