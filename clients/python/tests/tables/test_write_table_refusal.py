"""``write_table`` refused for a store its format's library cannot take leaves no table it
created (issue 50 item 9): a Delta write on GCS used to keep the name, so a retry as Parquet
failed with "has format 'delta'"."""

from __future__ import annotations

import pyarrow as pa
import pytest

from lakegate_client import (
    StorageCredential,
    TableCredentials,
    UnsupportedStorageError,
)
from lakegate_client.tables import ensure_table, write_table

from .fake_catalog import FakeCatalog

LOCATION = "gs://bucket/wh/t1"


def _catalog(tables: dict[str, str] | None = None) -> FakeCatalog:
    return FakeCatalog(LOCATION, tables, TableCredentials.from_parts(
        location=LOCATION, credentials=[StorageCredential(LOCATION, {
            "gcs.oauth2.token": "ya29.token", "gcs.oauth2.token-expires-at": "4000000000000"})]))


def test_a_refused_delta_create_on_gcs_is_dropped_so_parquet_can_take_the_name() -> None:
    catalog = _catalog()
    with pytest.raises(UnsupportedStorageError):
        write_table(catalog, "wh", "t1", pa.table({"id": [1]}), format="delta",  # type: ignore[arg-type]
                    create=True)
    assert catalog.dropped == ["t1"]
    assert ensure_table(catalog, "wh", "t1", fmt="parquet", create=True).format == "parquet"  # type: ignore[arg-type]


def test_a_refused_write_to_an_existing_table_drops_nothing() -> None:
    catalog = _catalog({"t1": "delta"})
    with pytest.raises(UnsupportedStorageError):
        write_table(catalog, "wh", "t1", pa.table({"id": [1]}), create=True)  # type: ignore[arg-type]
    assert catalog.tables == {"t1": "delta"}
    assert catalog.dropped == []
