"""The emulator's domain records (immutable) and their construction from SQLite rows."""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass
from typing import Any

from devstack.emulator.cloud_vending import base_location


@dataclass(frozen=True)
class Warehouse:
    id: str
    project_id: str
    name: str
    storage_profile: dict[str, Any]
    storage_credential: dict[str, Any] | None
    delete_profile: dict[str, Any]
    status: str
    protected: bool

    @property
    def soft_delete(self) -> bool:
        return self.delete_profile.get("type") == "soft"

    @property
    def base_location(self) -> str:
        """`s3://<bucket>/<key-prefix>`, `abfss://<fs>@<account>.<host>/<key-prefix>` or
        `gs://<bucket>/<key-prefix>` (no trailing slash)."""
        return base_location(self.storage_profile)


@dataclass(frozen=True)
class Namespace:
    id: str
    warehouse_id: str
    parts: list[str]
    properties: dict[str, str]


@dataclass(frozen=True)
class GenericTable:
    id: str
    warehouse_id: str
    namespace_id: str
    name: str
    format: str
    base_location: str
    doc: str | None
    properties: dict[str, str]
    schema: Any
    statistics: Any
    protected: bool
    protected_updated_at_us: int | None
    created_at_us: int
    deleted_at_us: int | None
    expiration_at_us: int | None


def warehouse_from_row(row: sqlite3.Row) -> Warehouse:
    cred = row["storage_credential"]
    return Warehouse(
        id=row["id"],
        project_id=row["project_id"],
        name=row["name"],
        storage_profile=json.loads(row["storage_profile"]),
        storage_credential=json.loads(cred) if cred else None,
        delete_profile=json.loads(row["delete_profile"]),
        status=row["status"],
        protected=bool(row["protected"]),
    )


def namespace_from_row(row: sqlite3.Row) -> Namespace:
    return Namespace(
        id=row["id"],
        warehouse_id=row["warehouse_id"],
        parts=json.loads(row["parts"]),
        properties=json.loads(row["properties"]),
    )


def table_from_row(row: sqlite3.Row) -> GenericTable:
    return GenericTable(
        id=row["id"],
        warehouse_id=row["warehouse_id"],
        namespace_id=row["namespace_id"],
        name=row["name"],
        format=row["format"],
        base_location=row["base_location"],
        doc=row["doc"],
        properties=json.loads(row["properties"]),
        schema=json.loads(row["schema_json"]) if row["schema_json"] else None,
        statistics=json.loads(row["statistics_json"]) if row["statistics_json"] else None,
        protected=bool(row["protected"]),
        protected_updated_at_us=row["protected_updated_at"],
        created_at_us=row["created_at"],
        deleted_at_us=row["deleted_at"],
        expiration_at_us=row["expiration_at"],
    )
