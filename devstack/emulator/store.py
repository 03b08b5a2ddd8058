"""The emulator's catalog state in SQLite, so a restart keeps the catalog.

Queries are small indexed statements on an in-process connection (WAL, synchronous=NORMAL),
so they run directly on the event loop: each takes microseconds, which is cheaper than a
thread hop. Names are stored as given and matched through case-folded key columns.
"""

from __future__ import annotations

import json
import sqlite3
import time
import uuid
from pathlib import Path
from typing import Any

from devstack.emulator.models import (
    GenericTable,
    Namespace,
    Warehouse,
    namespace_from_row,
    table_from_row,
    warehouse_from_row,
)
from devstack.emulator.names import fold, namespace_key
from devstack.emulator.pagination import Cursor

_SCHEMA = """
CREATE TABLE IF NOT EXISTS server (k TEXT PRIMARY KEY, v TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS warehouses (
  id TEXT PRIMARY KEY, project_id TEXT NOT NULL, name TEXT NOT NULL, name_key TEXT NOT NULL,
  storage_profile TEXT NOT NULL, storage_credential TEXT, delete_profile TEXT NOT NULL,
  status TEXT NOT NULL, protected INTEGER NOT NULL DEFAULT 0, created_at INTEGER NOT NULL,
  UNIQUE (project_id, name_key));
CREATE TABLE IF NOT EXISTS namespaces (
  id TEXT PRIMARY KEY, warehouse_id TEXT NOT NULL, parts TEXT NOT NULL, path_key TEXT NOT NULL,
  parent_key TEXT NOT NULL, properties TEXT NOT NULL, created_at INTEGER NOT NULL,
  UNIQUE (warehouse_id, path_key));
CREATE TABLE IF NOT EXISTS generic_tables (
  id TEXT PRIMARY KEY, warehouse_id TEXT NOT NULL, namespace_id TEXT NOT NULL,
  name TEXT NOT NULL, name_key TEXT NOT NULL, format TEXT NOT NULL, base_location TEXT NOT NULL,
  doc TEXT, properties TEXT NOT NULL, schema_json TEXT, statistics_json TEXT,
  protected INTEGER NOT NULL DEFAULT 0, protected_updated_at INTEGER,
  created_at INTEGER NOT NULL, deleted_at INTEGER, expiration_at INTEGER);
CREATE UNIQUE INDEX IF NOT EXISTS gt_live_name ON generic_tables (namespace_id, name_key)
  WHERE deleted_at IS NULL;
CREATE INDEX IF NOT EXISTS gt_list ON generic_tables (namespace_id, created_at, id);
CREATE INDEX IF NOT EXISTS gt_loc ON generic_tables (warehouse_id, base_location);
"""


def now_us() -> int:
    return time.time_ns() // 1000


class ConflictError(Exception):
    """A uniqueness constraint refused the write."""


def keyset_page(
    db: sqlite3.Connection, sql: str, args: list[Any], after: Cursor | None, limit: int
) -> list[sqlite3.Row]:
    """The rows of `sql` (a SELECT with a WHERE clause) after `after`, in (created_at, id) order.

    Keyset pagination, as Lakekeeper's list queries: a page never skips or repeats a row when
    rows are added between pages.
    """
    if after is not None:
        sql += " AND (created_at > ? OR (created_at = ? AND id > ?))"
        args = [*args, after.created_at_us, after.created_at_us, after.id]
    return db.execute(sql + " ORDER BY created_at, id LIMIT ?", [*args, limit]).fetchall()


def move_table_row(
    db: sqlite3.Connection, table: str, table_id: str, ns: Namespace, new_name: str
) -> None:
    """Rename a row of `table` into `ns` (ConflictError: the new name is taken there)."""
    try:
        db.execute(
            f"UPDATE {table} SET namespace_id = ?, name = ?, name_key = ? WHERE id = ?",  # noqa: S608 - constant name
            (ns.id, new_name, fold(new_name), table_id),
        )
    except sqlite3.IntegrityError as exc:
        raise ConflictError(new_name) from exc


def location_overlaps(
    db: sqlite3.Connection, table: str, column: str, warehouse_id: str, location: str
) -> bool:
    """True if `location` equals, contains or lies inside the `column` location of a row of
    `table` in the warehouse (Lakekeeper refuses overlapping table locations)."""
    row = db.execute(
        f"SELECT 1 FROM {table} WHERE warehouse_id = ? AND ({column} = ?"  # noqa: S608 - constant names
        f" OR substr({column}, 1, ?) = ? OR substr(?, 1, length({column}) + 1)"
        f" = {column} || '/') LIMIT 1",
        (warehouse_id, location, len(location) + 1, location + "/", location),
    ).fetchone()
    return row is not None


class Store:
    """All catalog state; one instance per emulator process."""

    def __init__(self, path: Path | str) -> None:
        self._db = sqlite3.connect(str(path), isolation_level=None, check_same_thread=False)
        self._db.row_factory = sqlite3.Row
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.executescript(_SCHEMA)
        # Warehouses never change after creation here, so the hot path reads them from memory.
        self._warehouses: dict[str, Warehouse] = {}

    def close(self) -> None:
        self._db.close()

    # --- server -------------------------------------------------------------------------
    def bootstrap(self) -> bool:
        """Mark the server bootstrapped; False if it already was."""
        try:
            self._db.execute("INSERT INTO server (k, v) VALUES ('bootstrapped', '1')")
        except sqlite3.IntegrityError:
            return False
        return True

    # --- warehouses ---------------------------------------------------------------------
    def create_warehouse(
        self,
        *,
        project_id: str,
        name: str,
        storage_profile: dict[str, Any],
        storage_credential: dict[str, Any] | None,
        delete_profile: dict[str, Any],
    ) -> Warehouse:
        wid = str(uuid.uuid4())
        try:
            self._db.execute(
                "INSERT INTO warehouses (id, project_id, name, name_key, storage_profile,"
                " storage_credential, delete_profile, status, created_at)"
                " VALUES (?,?,?,?,?,?,?,'active',?)",
                (
                    wid,
                    project_id,
                    name,
                    fold(name),
                    json.dumps(storage_profile),
                    json.dumps(storage_credential) if storage_credential is not None else None,
                    json.dumps(delete_profile),
                    now_us(),
                ),
            )
        except sqlite3.IntegrityError as exc:
            raise ConflictError(name) from exc
        found = self.get_warehouse(wid)
        assert found is not None
        return found

    def get_warehouse(self, warehouse_id: str) -> Warehouse | None:
        cached = self._warehouses.get(warehouse_id)
        if cached is not None:
            return cached
        row = self._db.execute("SELECT * FROM warehouses WHERE id = ?", (warehouse_id,)).fetchone()
        if row is None:
            return None
        wh = warehouse_from_row(row)
        self._warehouses[warehouse_id] = wh
        return wh

    def get_warehouse_by_name(self, project_id: str, name: str) -> Warehouse | None:
        row = self._db.execute(
            "SELECT * FROM warehouses WHERE project_id = ? AND name_key = ?",
            (project_id, fold(name)),
        ).fetchone()
        return warehouse_from_row(row) if row else None

    def list_warehouses(self, project_id: str) -> list[Warehouse]:
        rows = self._db.execute(
            "SELECT * FROM warehouses WHERE project_id = ? ORDER BY created_at", (project_id,)
        ).fetchall()
        return [warehouse_from_row(r) for r in rows]

    # --- namespaces ---------------------------------------------------------------------
    def create_namespace(
        self, warehouse_id: str, parts: list[str], properties: dict[str, str]
    ) -> Namespace:
        nid = str(uuid.uuid4())
        parent = namespace_key(parts[:-1])
        try:
            self._db.execute(
                "INSERT INTO namespaces (id, warehouse_id, parts, path_key, parent_key,"
                " properties, created_at) VALUES (?,?,?,?,?,?,?)",
                (
                    nid,
                    warehouse_id,
                    json.dumps(parts),
                    namespace_key(parts),
                    parent,
                    json.dumps(properties),
                    now_us(),
                ),
            )
        except sqlite3.IntegrityError as exc:
            raise ConflictError(".".join(parts)) from exc
        return Namespace(nid, warehouse_id, parts, properties)

    def get_namespace(self, warehouse_id: str, parts: list[str]) -> Namespace | None:
        row = self._db.execute(
            "SELECT * FROM namespaces WHERE warehouse_id = ? AND path_key = ?",
            (warehouse_id, namespace_key(parts)),
        ).fetchone()
        return namespace_from_row(row) if row else None

    def get_namespace_by_id(self, namespace_id: str) -> Namespace | None:
        row = self._db.execute("SELECT * FROM namespaces WHERE id = ?", (namespace_id,)).fetchone()
        return namespace_from_row(row) if row else None

    def list_namespaces(
        self, warehouse_id: str, parent: list[str] | None, after: Cursor | None, limit: int
    ) -> list[tuple[Namespace, Cursor]]:
        parent_key = namespace_key(parent) if parent else ""
        sql = "SELECT * FROM namespaces WHERE warehouse_id = ? AND parent_key = ?"
        rows = keyset_page(self._db, sql, [warehouse_id, parent_key], after, limit)
        return [(namespace_from_row(r), Cursor(r["created_at"], r["id"])) for r in rows]

    def namespace_has_children(self, ns: Namespace) -> bool:
        key = namespace_key(ns.parts)
        child = self._db.execute(
            "SELECT 1 FROM namespaces WHERE warehouse_id = ? AND parent_key = ? LIMIT 1",
            (ns.warehouse_id, key),
        ).fetchone()
        table = self._db.execute(
            "SELECT 1 FROM generic_tables WHERE namespace_id = ? LIMIT 1", (ns.id,)
        ).fetchone()
        return child is not None or table is not None

    def drop_namespace(self, ns: Namespace, *, recursive: bool) -> None:
        key = namespace_key(ns.parts)
        self._db.execute("BEGIN")
        try:
            if recursive:
                ids = [
                    r["id"]
                    for r in self._db.execute(
                        "SELECT id FROM namespaces WHERE warehouse_id = ? AND"
                        " (path_key = ? OR substr(path_key, 1, ?) = ?)",
                        (ns.warehouse_id, key, len(key) + 1, key + "\x1f"),
                    )
                ]
                for nid in ids:
                    self._db.execute("DELETE FROM generic_tables WHERE namespace_id = ?", (nid,))
                    self._db.execute("DELETE FROM namespaces WHERE id = ?", (nid,))
            else:
                self._db.execute("DELETE FROM namespaces WHERE id = ?", (ns.id,))
            self._db.execute("COMMIT")
        except BaseException:
            self._db.execute("ROLLBACK")
            raise

    # --- generic tables -----------------------------------------------------------------
    def location_taken(self, warehouse_id: str, location: str) -> bool:
        """True if `location` equals, contains or lies inside another table's location."""
        return location_overlaps(
            self._db, "generic_tables", "base_location", warehouse_id, location
        )

    def create_table(
        self,
        *,
        table_id: str,
        ns: Namespace,
        name: str,
        fmt: str,
        base_location: str,
        doc: str | None,
        properties: dict[str, str],
        schema: Any,
        statistics: Any,
    ) -> GenericTable:
        created = now_us()
        try:
            self._db.execute(
                "INSERT INTO generic_tables (id, warehouse_id, namespace_id, name, name_key,"
                " format, base_location, doc, properties, schema_json, statistics_json,"
                " created_at) VALUES (?,?,?,?,?,?,?,?,?,?,?,?)",
                (
                    table_id,
                    ns.warehouse_id,
                    ns.id,
                    name,
                    fold(name),
                    fmt,
                    base_location,
                    doc,
                    json.dumps(properties),
                    json.dumps(schema) if schema is not None else None,
                    json.dumps(statistics) if statistics is not None else None,
                    created,
                ),
            )
        except sqlite3.IntegrityError as exc:
            raise ConflictError(name) from exc
        found = self.get_table_by_id(table_id)
        assert found is not None
        return found

    def get_table(self, ns: Namespace, name: str) -> GenericTable | None:
        row = self._db.execute(
            "SELECT * FROM generic_tables WHERE namespace_id = ? AND name_key = ?"
            " AND deleted_at IS NULL",
            (ns.id, fold(name)),
        ).fetchone()
        return table_from_row(row) if row else None

    def get_table_by_id(self, table_id: str) -> GenericTable | None:
        row = self._db.execute("SELECT * FROM generic_tables WHERE id = ?", (table_id,)).fetchone()
        return table_from_row(row) if row else None

    def list_tables(self, ns: Namespace, after: Cursor | None, limit: int) -> list[GenericTable]:
        sql = "SELECT * FROM generic_tables WHERE namespace_id = ? AND deleted_at IS NULL"
        return [table_from_row(r) for r in keyset_page(self._db, sql, [ns.id], after, limit)]

    def hard_delete_table(self, table_id: str) -> None:
        self._db.execute("DELETE FROM generic_tables WHERE id = ?", (table_id,))

    def soft_delete_table(self, table_id: str, expiration_s: int) -> None:
        now = now_us()
        self._db.execute(
            "UPDATE generic_tables SET deleted_at = ?, expiration_at = ? WHERE id = ?",
            (now, now + expiration_s * 1_000_000, table_id),
        )

    def rename_table(self, table_id: str, ns: Namespace, new_name: str) -> None:
        move_table_row(self._db, "generic_tables", table_id, ns, new_name)

    def set_protection(self, table_id: str, protected: bool) -> int:
        updated = now_us()
        self._db.execute(
            "UPDATE generic_tables SET protected = ?, protected_updated_at = ? WHERE id = ?",
            (int(protected), updated, table_id),
        )
        return updated

    def list_deleted(
        self, warehouse_id: str, namespace_id: str | None, after: Cursor | None, limit: int
    ) -> list[GenericTable]:
        sql = (
            "SELECT * FROM generic_tables WHERE warehouse_id = ? AND deleted_at IS NOT NULL"
            " AND expiration_at > ?"
        )
        args: list[Any] = [warehouse_id, now_us()]
        if namespace_id is not None:
            sql += " AND namespace_id = ?"
            args.append(namespace_id)
        return [table_from_row(r) for r in keyset_page(self._db, sql, args, after, limit)]

    def undrop_table(self, table_id: str) -> None:
        try:
            self._db.execute(
                "UPDATE generic_tables SET deleted_at = NULL, expiration_at = NULL WHERE id = ?",
                (table_id,),
            )
        except sqlite3.IntegrityError as exc:
            raise ConflictError(table_id) from exc
