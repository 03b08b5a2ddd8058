"""A Spark Delta write on GCS is refused at planning, with deltalake's reason, before any task
writes a file (deltalake cannot take the vended OAuth token; the driver's commit would fail
after every task had written its Parquet)."""

from __future__ import annotations

import pytest

from lakegate_client import StorageCredential, TableCredentials, UnsupportedStorageError
from lakegate_client.tables.catalog import TableInfo

pytest.importorskip("pyspark")

LOCATION = "gs://bucket/wh/t1"
CONFIG = {"gcs.oauth2.token": "ya29.token", "gcs.oauth2.token-expires-at": "4000000000000"}


def test_a_delta_write_on_gcs_is_refused_before_anything_is_written(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from pyspark.sql.types import LongType, StructField, StructType

    from lakegate_client.spark import datasource

    creds = TableCredentials.from_parts(
        location=LOCATION, credentials=[StorageCredential(LOCATION, CONFIG)]
    )
    info = TableInfo(namespace=("wh",), name="t1", format="delta", location=LOCATION)
    touched: list[str] = []
    monkeypatch.setattr(datasource, "client_for", lambda _url: None)
    monkeypatch.setattr(datasource.tables, "ensure_table", lambda *_a, **_k: info)
    monkeypatch.setattr(datasource, "table_credentials", lambda *_a, **_k: creds)
    monkeypatch.setattr(datasource, "convert_to_plain", lambda *_a: touched.append("convert"))
    source = datasource.LakekeeperDataSource({"table": "wh.t1"})
    with pytest.raises(UnsupportedStorageError, match=r"object_store 0\.13"):
        source.writer(StructType([StructField("id", LongType())]), True)
    assert touched == []
