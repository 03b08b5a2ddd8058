"""``write_table`` refused for a store its format's library cannot take leaves no table it
created (issue 50 item 9): a Delta write on GCS used to keep the name, so a retry as Parquet
failed with "has format 'delta'"."""

from __future__ import annotations

import pyarrow as pa
import pytest

from lakegate_client import (
    NotFoundError,
    StorageCredential,
    TableCredentials,
    UnsupportedStorageError,
)
from lakegate_client._models import LoadedTable
from lakegate_client.tables import ensure_table, write_table

LOCATION = "gs://bucket/wh/t1"


class _Catalog:
    """Enough of ``Client`` for ``write_table``'s planning on GCS."""

    def __init__(self, tables: dict[str, str] | None = None) -> None:
        self.tables = dict(tables or {})
        self.dropped: list[str] = []

    def load(self, namespace: list[str], table: str, warehouse: str | None = None) -> LoadedTable:
        if table not in self.tables:
            raise NotFoundError(f"no table {table}")
        return LoadedTable(tuple(namespace), table, self.tables[table], LOCATION)

    def create(self, namespace: list[str], table: str, format: str,
               warehouse: str | None = None) -> LoadedTable:
        self.tables[table] = format
        return self.load(namespace, table)

    def drop(self, namespace: list[str], table: str, warehouse: str | None = None) -> None:
        del self.tables[table]
        self.dropped.append(table)

    def credentials(self, namespace: list[str], table: str, **_kw: object) -> TableCredentials:
        return TableCredentials.from_parts(location=LOCATION, credentials=[StorageCredential(
            LOCATION, {"gcs.oauth2.token": "ya29.token",
                       "gcs.oauth2.token-expires-at": "4000000000000"})])


def test_a_refused_delta_create_on_gcs_is_dropped_so_parquet_can_take_the_name() -> None:
    catalog = _Catalog()
    with pytest.raises(UnsupportedStorageError):
        write_table(catalog, "wh", "t1", pa.table({"id": [1]}), format="delta",  # type: ignore[arg-type]
                    create=True)
    assert catalog.dropped == ["t1"]
    assert ensure_table(catalog, "wh", "t1", fmt="parquet", create=True).format == "parquet"  # type: ignore[arg-type]


def test_a_refused_write_to_an_existing_table_drops_nothing() -> None:
    catalog = _Catalog({"t1": "delta"})
    with pytest.raises(UnsupportedStorageError):
        write_table(catalog, "wh", "t1", pa.table({"id": [1]}), create=True)  # type: ignore[arg-type]
    assert catalog.tables == {"t1": "delta"}
    assert catalog.dropped == []
