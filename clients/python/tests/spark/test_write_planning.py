"""Spark write planning on the fakes (issue 50 items 3, 5, 9): a schema that does not fit is
refused before the probe or any task writes; a write refused at planning leaves no table it
created (a Delta write on GCS used to keep the name, so a retry as Parquet failed with "has
format 'delta'"); an empty overwrite of a plain table leaves a readable 0-row file."""

from __future__ import annotations

import io
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from lakegate_client import StorageCredential, TableCredentials
from lakegate_client.tables.schema_fit import SchemaMismatchError

from ..engine.stores.fake_adls import FakeAdls
from ..tables.fake_catalog import FakeCatalog
from .adls_planning import LOCATION, WHERE, adls_creds, plan_adls_write

pytest.importorskip("pyspark")

TABLE = pa.schema([pa.field("id", pa.int64(), nullable=False), ("label", pa.string())])


def _spark(schema: pa.Schema) -> Any:
    from pyspark.sql.pandas.types import from_arrow_schema

    return from_arrow_schema(schema)


def _writer(monkeypatch: pytest.MonkeyPatch, store: FakeAdls, schema: pa.Schema,
            current: pa.Schema | None, overwrite: bool, fmt: str = "parquet",
            **options: str) -> Any:
    return plan_adls_write(monkeypatch, store, _spark(schema), overwrite, fmt, current,
                           **options)


@pytest.mark.parametrize("fmt", ["parquet", "delta"])
@pytest.mark.parametrize("overwrite", [False, True])
def test_a_write_that_does_not_fit_is_refused_before_the_store_is_touched(
        monkeypatch: pytest.MonkeyPatch, fmt: str, overwrite: bool) -> None:
    store = FakeAdls()
    wrong = pa.schema([("id", pa.string()), ("label", pa.string()), ("extra", pa.int32())])
    with pytest.raises(SchemaMismatchError, match=r"table ns\.t1") as refused:
        _writer(monkeypatch, store, wrong, TABLE, overwrite, fmt)
    assert refused.value.columns == ("id", "extra")
    assert store.calls == []  # not even the probe


def test_a_fitting_write_is_planned_with_the_tables_schema(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A narrower column is written in the table's type, a missing nullable one as nulls."""
    store = FakeAdls()
    planned = _writer(monkeypatch, store, pa.schema([pa.field("id", pa.int32(), False)]), TABLE,
                      overwrite=False)
    assert planned._schema.names == ["id", "label"]
    assert planned._schema.field("id").type == pa.int64()


def test_merge_schema_on_delta_plans_the_added_column_and_plain_tables_refuse_it(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from lakegate_client.spark import datasource

    wider = TABLE.append(pa.field("extra", pa.int32()))
    added: list[tuple[str, ...]] = []
    monkeypatch.setattr(datasource, "add_delta_columns", lambda _c, fit: added.append(fit.added))
    planned = _writer(monkeypatch, FakeAdls(), wider, TABLE, False, "delta", mergeSchema="true")
    assert planned._schema.names == ["id", "label", "extra"]
    assert added == [("extra",)]  # committed at planning, before any task writes
    store = FakeAdls()
    with pytest.raises(Exception, match="parquet tables have no mergeSchema"):
        _writer(monkeypatch, store, wider, TABLE, False, "parquet", mergeSchema="true")
    assert store.calls == []


def test_an_empty_overwrite_of_a_plain_table_publishes_a_zero_row_file_of_its_schema(
        monkeypatch: pytest.MonkeyPatch) -> None:
    store = FakeAdls()
    job = _writer(monkeypatch, store, TABLE, TABLE, overwrite=True)
    job.commit([])  # no task had a row: no task message at all
    files = [k for k in store.objects if k.endswith(".parquet")]
    assert [WHERE.relative(k).split("-")[1] for k in files] == [job._plan.write_id]
    written = pq.read_table(io.BytesIO(store.objects[files[0]]))
    assert written.num_rows == 0
    assert written.schema.equals(TABLE)


def test_a_delta_write_on_gcs_refused_at_planning_leaves_no_table_so_parquet_can_be_created(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from lakegate_client import UnsupportedStorageError, tables
    from lakegate_client.spark import datasource

    location = "gs://bucket/wh/t1"
    creds = TableCredentials.from_parts(location=location, credentials=[StorageCredential(
        location, {"gcs.oauth2.token": "ya29.token",
                   "gcs.oauth2.token-expires-at": "4000000000000"})])
    catalog = FakeCatalog(location)
    monkeypatch.setattr(datasource, "client_for", lambda _url: catalog)
    monkeypatch.setattr(datasource, "table_credentials", lambda *_a, **_k: creds)
    source = datasource.LakekeeperDataSource({"table": "wh.t1", "format": "delta",
                                              "create": "true"})
    with pytest.raises(UnsupportedStorageError):
        source.writer(_spark(TABLE), True)
    assert catalog.dropped == ["t1"]
    assert catalog.tables == {}
    info = tables.ensure_table(catalog, "wh", "t1", fmt="parquet", create=True)  # type: ignore[arg-type]
    assert info.format == "parquet"


def test_a_refused_write_to_a_table_it_did_not_create_drops_nothing(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from lakegate_client.spark import datasource

    catalog = FakeCatalog(LOCATION, {"t1": "parquet"})
    monkeypatch.setattr(datasource, "client_for", lambda _url: catalog)
    monkeypatch.setattr(datasource, "table_credentials", lambda *_a, **_k: adls_creds())
    monkeypatch.setattr(datasource, "table_schema", lambda *_a: TABLE)
    source = datasource.LakekeeperDataSource({"table": "wh.t1", "create": "true"})
    with pytest.raises(SchemaMismatchError):
        source.writer(_spark(pa.schema([("other", pa.string())])), False)
    assert catalog.tables == {"t1": "parquet"}
    assert catalog.dropped == []


def test_schema_options_the_format_lacks_are_refused_before_the_create(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from lakegate_client.spark import datasource

    catalog = FakeCatalog(LOCATION)
    monkeypatch.setattr(datasource, "client_for", lambda _url: catalog)
    source = datasource.LakekeeperDataSource({"table": "wh.t1", "format": "lance",
                                              "create": "true", "mergeSchema": "true"})
    with pytest.raises(Exception, match="lance tables have no mergeSchema"):
        source.writer(_spark(TABLE), False)
    assert catalog.tables == {}
    assert catalog.dropped == []
