"""Iceberg views: their rows in SQLite and their metadata (pyiceberg's `ViewMetadata`).

As for tables, the catalog keeps each view's current metadata and writes the file to storage
(`<location>/metadata/NNNNN-<uuid>.metadata.json`); a replace moves the pointer by
compare-and-set. Commits understand the view requirement and updates of the REST spec that
clients send (`assert-view-uuid`; `set-properties`, `remove-properties`, `add-schema`,
`add-view-version`, `set-current-view-version`, `set-location`); others are refused (400).
"""

from __future__ import annotations

import asyncio
import sqlite3
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import Field
from pyiceberg.io.pyarrow import PyArrowFileIO
from pyiceberg.schema import Schema
from pyiceberg.table import TableIdentifier
from pyiceberg.view.metadata import ViewMetadata, ViewVersion

from devstack.emulator.models import Namespace
from devstack.emulator.names import fold
from devstack.emulator.pagination import Cursor
from devstack.emulator.store import ConflictError, keyset_page, move_table_row, now_us
from devstack.emulator.wire import Body

_SCHEMA = """
CREATE TABLE IF NOT EXISTS iceberg_views (
  id TEXT PRIMARY KEY, warehouse_id TEXT NOT NULL, namespace_id TEXT NOT NULL,
  name TEXT NOT NULL, name_key TEXT NOT NULL, location TEXT NOT NULL,
  metadata_location TEXT NOT NULL, metadata_json TEXT NOT NULL, created_at INTEGER NOT NULL,
  UNIQUE (namespace_id, name_key));
"""
_SELECT = (
    "SELECT id, warehouse_id, namespace_id, name, location, metadata_location, metadata_json,"
    " created_at FROM iceberg_views"
)


class CreateView(Body):
    """Iceberg `CreateViewRequest`."""

    name: str
    location: str | None = None
    schema_: Schema = Field(alias="schema")
    view_version: ViewVersion = Field(alias="view-version")
    properties: dict[str, str] = Field(default_factory=dict)


class CommitView(Body):
    """Iceberg `CommitViewRequest` (requirements and updates as JSON objects)."""

    identifier: TableIdentifier | None = None
    requirements: tuple[dict[str, Any], ...] = ()
    updates: tuple[dict[str, Any], ...] = ()


class RenameView(Body):
    source: TableIdentifier
    destination: TableIdentifier


@dataclass(frozen=True)
class ViewRow:
    id: str
    warehouse_id: str
    namespace_id: str
    name: str
    location: str
    metadata_location: str
    metadata_json: str
    created_at_us: int


class ViewStore:
    """View rows; a separate connection on the emulator's database file, like IcebergStore."""

    def __init__(self, path: Path | str) -> None:
        self._db = sqlite3.connect(str(path), isolation_level=None, check_same_thread=False)
        self._db.row_factory = sqlite3.Row
        self._db.execute("PRAGMA busy_timeout=2000")
        self._db.executescript(_SCHEMA)

    def close(self) -> None:
        self._db.close()

    def create(self, *, view_id: str, ns: Namespace, name: str, location: str,
               metadata_location: str, metadata_json: str) -> ViewRow:
        created = now_us()
        try:
            self._db.execute(
                "INSERT INTO iceberg_views (id, warehouse_id, namespace_id, name, name_key,"
                " location, metadata_location, metadata_json, created_at)"
                " VALUES (?,?,?,?,?,?,?,?,?)",
                (view_id, ns.warehouse_id, ns.id, name, fold(name), location, metadata_location,
                 metadata_json, created))
        except sqlite3.IntegrityError as exc:
            raise ConflictError(name) from exc
        return ViewRow(view_id, ns.warehouse_id, ns.id, name, location, metadata_location,
                       metadata_json, created)

    def get(self, ns: Namespace, name: str) -> ViewRow | None:
        row = self._db.execute(f"{_SELECT} WHERE namespace_id = ? AND name_key = ?",
                               (ns.id, fold(name))).fetchone()
        return ViewRow(*row) if row else None

    def list(self, ns: Namespace, after: Cursor | None, limit: int) -> list[ViewRow]:
        rows = keyset_page(self._db, f"{_SELECT} WHERE namespace_id = ?", [ns.id], after, limit)
        return [ViewRow(*r) for r in rows]

    def swap_metadata(self, view_id: str, expected: str, new_location: str,
                      metadata_json: str) -> bool:
        cur = self._db.execute(
            "UPDATE iceberg_views SET metadata_location = ?, metadata_json = ?, location = ?"
            " WHERE id = ? AND metadata_location = ?",
            (new_location, metadata_json, ViewMetadata.model_validate_json(metadata_json)
             .location, view_id, expected))
        return cur.rowcount == 1

    def delete(self, view_id: str) -> None:
        self._db.execute("DELETE FROM iceberg_views WHERE id = ?", (view_id,))

    def rename(self, view_id: str, ns: Namespace, new_name: str) -> None:
        move_table_row(self._db, "iceberg_views", view_id, ns, new_name)

    def has_views(self, ns: Namespace) -> bool:
        return self._db.execute("SELECT 1 FROM iceberg_views WHERE namespace_id = ? LIMIT 1",
                                (ns.id,)).fetchone() is not None


def metadata_file(location: str, version: int) -> str:
    return f"{location}/metadata/{version:05d}-{uuid.uuid4()}.metadata.json"


def new_view_metadata(req: CreateView, location: str, view_id: str) -> ViewMetadata:
    """Version 1 of a new view: its schema as schema 0, its version as version 1."""
    version = req.view_version.model_copy(update={"version_id": 1, "schema_id": 0})
    schema = req.schema_.model_copy(update={"schema_id": 0})
    return ViewMetadata.model_validate({
        "view-uuid": view_id, "format-version": 1, "location": location,
        "schemas": [schema.model_dump(by_alias=True)], "current-version-id": 1,
        "versions": [version.model_dump(by_alias=True)],
        "version-log": [{"timestamp-ms": version.timestamp_ms, "version-id": 1}],
        "properties": req.properties,
    })


def apply_view_commit(base: ViewMetadata, body: CommitView) -> ViewMetadata:
    """The metadata after `body` (ValueError: a failed requirement or an unknown update)."""
    for req in body.requirements:
        if req.get("type") != "assert-view-uuid":
            raise ValueError(f"unknown requirement {req.get('type')!r}")
        if str(req.get("uuid")) != str(base.view_uuid):
            raise LookupError("the view's uuid changed")
    doc = json_of(base)
    last_added: int | None = None
    for update in body.updates:
        action = update.get("action")
        if action == "set-properties":
            doc["properties"] = {**doc.get("properties", {}), **update["updates"]}
        elif action == "remove-properties":
            doc["properties"] = {k: v for k, v in doc.get("properties", {}).items()
                                 if k not in set(update["removals"])}
        elif action == "add-schema":
            schema = dict(update["schema"])
            schema["schema-id"] = max(s["schema-id"] for s in doc["schemas"]) + 1
            doc["schemas"].append(schema)
        elif action == "add-view-version":
            version = dict(update["view-version"])
            version["version-id"] = max(v["version-id"] for v in doc["versions"]) + 1
            if version.get("schema-id") == -1:
                version["schema-id"] = doc["schemas"][-1]["schema-id"]
            doc["versions"].append(version)
            last_added = version["version-id"]
        elif action == "set-current-view-version":
            vid = update["view-version-id"]
            doc["current-version-id"] = last_added if vid == -1 else vid
            doc["version-log"].append({"timestamp-ms": int(time.time() * 1000),
                                       "version-id": doc["current-version-id"]})
        elif action == "set-location":
            doc["location"] = update["location"].rstrip("/")
        else:
            raise ValueError(f"unknown update {action!r}")
    return ViewMetadata.model_validate(doc)


def json_of(metadata: ViewMetadata) -> dict[str, Any]:
    import json

    out: dict[str, Any] = json.loads(metadata.model_dump_json(by_alias=True, exclude_none=True))
    return out


def _write_blocking(metadata: ViewMetadata, location: str, io_props: dict[str, str]) -> None:
    output = PyArrowFileIO(properties=io_props).new_output(location)
    with output.create(overwrite=True) as f:
        f.write(metadata.model_dump_json(by_alias=True, exclude_none=True).encode())


async def write_view_metadata(metadata: ViewMetadata, location: str,
                              io_props: dict[str, str]) -> None:
    """Write the view's metadata file to storage (worker thread, bounded)."""
    await asyncio.wait_for(asyncio.to_thread(_write_blocking, metadata, location, io_props),
                           timeout=60.0)
