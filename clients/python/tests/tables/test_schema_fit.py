"""``schema_fit``: a write's schema against its table's, per format (issue 50 item 3). Before it,
nothing compared them: an append with an extra column, another type or a missing required
column committed."""

from __future__ import annotations

import pyarrow as pa
import pytest

from lakegate_client.tables.catalog import TableFormatError
from lakegate_client.tables.schema_fit import SchemaMismatchError, conform_batch, fit_schema

TABLE = pa.schema([pa.field("id", pa.int64(), nullable=False), ("label", pa.string()),
                   ("score", pa.float64())])
GENERIC = ("parquet", "delta", "lance")
ALL = (*GENERIC, "iceberg")


def _fit(incoming: pa.Schema, fmt: str, **kw: bool) -> pa.Schema:
    return fit_schema(TABLE, incoming, fmt=fmt, table="ns.t", overwrite=kw.pop("overwrite", False),
                      **kw).schema


@pytest.mark.parametrize("fmt", ALL)
@pytest.mark.parametrize("overwrite", [False, True])
def test_an_extra_column_is_refused_naming_it_and_the_table(fmt: str, overwrite: bool) -> None:
    incoming = TABLE.append(pa.field("extra", pa.int32())).append(pa.field("more", pa.bool_()))
    with pytest.raises(SchemaMismatchError, match=r"table ns\.t.*'extra' is not in the table") as e:
        _fit(incoming, fmt, overwrite=overwrite)
    assert e.value.columns == ("extra", "more")
    assert e.value.table == "ns.t"


@pytest.mark.parametrize("fmt", ALL)
def test_another_type_is_refused(fmt: str) -> None:
    incoming = pa.schema([("id", pa.string()), ("label", pa.string()), ("score", pa.float64())])
    with pytest.raises(SchemaMismatchError, match="'id' is string in the DataFrame, not the "
                                                  "table's int64") as e:
        _fit(incoming, fmt)
    assert e.value.columns == ("id",)


@pytest.mark.parametrize("fmt", ALL)
def test_a_missing_required_column_is_refused_a_missing_nullable_one_written_as_nulls(
        fmt: str) -> None:
    with pytest.raises(SchemaMismatchError, match="'id' is required by the table"):
        _fit(pa.schema([("label", pa.string())]), fmt)
    fitted = _fit(pa.schema([("id", pa.int64()), ("score", pa.float64())]), fmt)
    assert fitted.names == ["id", "label", "score"]
    batch = pa.record_batch([pa.array([1, 2]), pa.array([0.5, 1.0])], names=["id", "score"])
    assert conform_batch(batch, fitted).column("label").to_pylist() == [None, None]


@pytest.mark.parametrize("fmt", ALL)
def test_a_narrower_type_is_cast_up_a_wider_one_refused(fmt: str) -> None:
    narrow = pa.schema([("id", pa.int32()), ("label", pa.string()), ("score", pa.float32())])
    fitted = _fit(narrow, fmt)
    assert fitted.field("id").type == pa.int64()
    assert fitted.field("score").type == pa.float64()
    table = pa.schema([("n", pa.int32())])
    with pytest.raises(SchemaMismatchError, match="'n' is int64 in the DataFrame, wider than"):
        fit_schema(table, pa.schema([("n", pa.int64())]), fmt=fmt, table="ns.t", overwrite=False)


@pytest.mark.parametrize("fmt", ALL)
def test_spellings_of_one_type_fit(fmt: str) -> None:
    """Spark's Arrow spelling, Delta's and a Parquet footer's differ for one column type."""
    table = pa.schema([("s", pa.large_string()), ("t", pa.timestamp("ns", tz="UTC")),
                       ("l", pa.large_list(pa.string_view()))])
    spark = pa.schema([("s", pa.string()), ("t", pa.timestamp("us", tz="UTC")),
                       ("l", pa.list_(pa.string()))])
    assert fit_schema(table, spark, fmt=fmt, table="ns.t", overwrite=False).schema == spark
    with pytest.raises(SchemaMismatchError, match="'t'"):  # with or without a zone: not one type
        fit_schema(table, spark.set(1, pa.field("t", pa.timestamp("us"))), fmt=fmt,
                   table="ns.t", overwrite=False)


@pytest.mark.parametrize("fmt", ["delta", "iceberg"])
def test_merge_schema_adds_columns_where_the_format_evolves(fmt: str) -> None:
    incoming = TABLE.append(pa.field("extra", pa.int32(), nullable=False))
    fit = fit_schema(TABLE, incoming, fmt=fmt, table="ns.t", overwrite=False, merge_schema=True)
    assert fit.added == ("extra",)
    assert fit.schema.names == ["id", "label", "score", "extra"]
    assert fit.schema.field("extra").nullable  # old rows have none


@pytest.mark.parametrize("fmt", ["parquet", "lance"])
def test_merge_schema_is_refused_where_the_format_cannot_evolve(fmt: str) -> None:
    with pytest.raises(TableFormatError, match=f"{fmt} tables have no mergeSchema"):
        _fit(TABLE, fmt, merge_schema=True)


def test_type_widening_evolves_only_iceberg_with_merge_schema() -> None:
    table = pa.schema([("n", pa.int32()), ("x", pa.float32()), ("d", pa.decimal128(9, 2))])
    wide = pa.schema([("n", pa.int64()), ("x", pa.float64()), ("d", pa.decimal128(18, 2))])
    fit = fit_schema(table, wide, fmt="iceberg", table="ns.t", overwrite=False,
                     merge_schema=True)
    assert fit.promoted == ("n", "x", "d")
    with pytest.raises(SchemaMismatchError) as e:  # delta-rs has no type widening
        fit_schema(table, wide, fmt="delta", table="ns.t", overwrite=False, merge_schema=True)
    assert e.value.columns == ("n", "x", "d")
    with pytest.raises(SchemaMismatchError, match="'n'"):  # a promotion Iceberg does not have
        fit_schema(table, pa.schema([("n", pa.string())]), fmt="iceberg", table="ns.t",
                   overwrite=False, merge_schema=True)


@pytest.mark.parametrize("fmt", GENERIC)
def test_overwrite_schema_replaces_the_schema_on_an_overwrite_only(fmt: str) -> None:
    other = pa.schema([("k", pa.string())])
    fit = fit_schema(TABLE, other, fmt=fmt, table="ns.t", overwrite=True, overwrite_schema=True)
    assert fit.schema == other
    assert fit.replaced
    with pytest.raises(SchemaMismatchError, match="overwriteSchema=true replaces the schema"):
        fit_schema(TABLE, other, fmt=fmt, table="ns.t", overwrite=True)
    with pytest.raises(TableFormatError, match="overwriteSchema applies to overwrites only"):
        fit_schema(TABLE, other, fmt=fmt, table="ns.t", overwrite=False, overwrite_schema=True)


def test_iceberg_has_no_overwrite_schema() -> None:
    with pytest.raises(TableFormatError, match="iceberg tables have no overwriteSchema"):
        fit_schema(TABLE, TABLE, fmt="iceberg", table="ns.t", overwrite=True,
                   overwrite_schema=True)


@pytest.mark.parametrize("fmt", ALL)
def test_a_table_without_a_schema_takes_the_dataframes(fmt: str) -> None:
    incoming = pa.schema([("anything", pa.binary())])
    assert fit_schema(None, incoming, fmt=fmt, table="ns.t", overwrite=False).schema == incoming


def test_conform_orders_casts_and_leaves_a_fitting_batch_alone() -> None:
    schema = pa.schema([("b", pa.int64()), ("a", pa.string())])
    batch = pa.record_batch([pa.array(["x"]), pa.array([1], pa.int32())], names=["a", "b"])
    conformed = conform_batch(batch, schema)
    assert conformed.schema == schema
    assert conformed.to_pylist() == [{"b": 1, "a": "x"}]
    assert conform_batch(conformed, schema) is conformed
