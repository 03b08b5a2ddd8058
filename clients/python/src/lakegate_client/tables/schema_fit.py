"""Whether a write's schema fits its table: decided on the driver at planning, before any task
writes a byte.

Why here: PySpark never compares a Python data source's write schema with ``schema()``, and the
stores do not either, so without this check an append with the wrong schema commits (a Delta
version no reader can read, a plain table whose files disagree, an Iceberg write that drops
columns). :func:`fit_schema` takes the table's current schema, the DataFrame's, the mode and the
two options, and answers the schema the tasks write with (:func:`conform_batch` shapes each batch
to it) or raises :class:`SchemaMismatchError` naming every offending column and the table.

The rules, per format (columns are matched by name, exactly):

- every format: a DataFrame column may be narrower than the table's and is cast up on write
  (int8 -> int16 -> int32 -> int64, float32 -> float64, a decimal of the same scale and fewer
  digits); string/large_string/string_view (and binary, list, timestamp unit) spellings are
  one type; a table column the DataFrame lacks is written as nulls when the table allows nulls
  there and refused when it does not; a DataFrame column of another type, or wider than the
  table's, is refused.
- ``delta`` (Delta's rules as delta-rs applies them): a DataFrame column the table lacks is
  refused unless ``mergeSchema``, which adds it (nullable) in the commit's metadata; a wider
  type is refused even with it (delta-rs has no type widening); an overwrite is checked like an
  append unless ``overwriteSchema``, which replaces the schema with the DataFrame's.
- ``parquet`` (plain tables, against the schema of the table's current files): as Delta, except
  that ``mergeSchema`` is refused (every file of a plain table carries the whole schema, so a
  column cannot be added without rewriting the table: overwrite it with ``overwriteSchema``).
- ``lance``: as plain tables (``mergeSchema`` refused; ``overwriteSchema`` on an overwrite).
- ``iceberg`` (Iceberg's rules, as Spark's Iceberg writer): a DataFrame column the table lacks is
  refused ("too many data columns") unless ``mergeSchema``, which adds it (optional) to the
  table's schema at planning, as Iceberg's own writer does; a missing optional column is written
  as nulls, a missing required one refused; a wider DataFrame type is refused unless
  ``mergeSchema`` and Iceberg allows the promotion (int -> long, float -> double, decimal
  precision); ``overwriteSchema`` does not exist for Iceberg and is refused; an overwrite is
  checked like an append.

``overwriteSchema`` on an append is refused for every format; with both options on an
overwrite, ``overwriteSchema`` wins. Nullability of columns the DataFrame has is not checked
(Spark marks most columns nullable whatever their data holds).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from lakegate_client.tables.catalog import DIRECTORY_FORMATS, TableFormatError

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = [
    "MERGE_SCHEMA_OPTION",
    "OVERWRITE_SCHEMA_OPTION",
    "SchemaFit",
    "SchemaMismatchError",
    "check_schema_options",
    "conform_batch",
    "fit_schema",
]

MERGE_SCHEMA_OPTION = "mergeSchema"
OVERWRITE_SCHEMA_OPTION = "overwriteSchema"
EVOLVING_FORMATS: tuple[str, ...] = ("delta", "iceberg")  # mergeSchema adds columns
REPLACING_FORMATS: tuple[str, ...] = ("delta", "lance", *DIRECTORY_FORMATS)  # overwriteSchema


class SchemaMismatchError(TableFormatError):
    """A write's schema does not fit its table's; ``columns`` names the offending columns.

    Raised at planning, before anything is written: the table is unchanged.
    """

    def __init__(self, table: str, problems: Sequence[tuple[str, str]], hint: str = "") -> None:
        self.table = table
        self.columns: tuple[str, ...] = tuple(name for name, _ in problems)
        detail = "; ".join(f"{name!r} {why}" for name, why in problems)
        super().__init__(f"the write does not fit the schema of table {table}: {detail}"
                         + (f" ({hint})" if hint else ""))


@dataclass(frozen=True)
class SchemaFit:
    """The schema the tasks write with, and what it changes in the table's schema."""

    schema: pa.Schema
    added: tuple[str, ...] = ()  # columns mergeSchema adds
    promoted: tuple[str, ...] = ()  # columns whose type mergeSchema widens (Iceberg)
    replaced: bool = False  # overwriteSchema replaces the table's schema

    @property
    def evolves(self) -> bool:
        return bool(self.added or self.promoted or self.replaced)


def check_schema_options(fmt: str, *, overwrite: bool, merge_schema: bool,
                         overwrite_schema: bool) -> None:
    """Refuse option combinations the format does not have (before anything is created)."""
    if overwrite_schema and not overwrite:
        raise TableFormatError(f"{OVERWRITE_SCHEMA_OPTION} applies to overwrites only")
    if overwrite_schema and fmt not in REPLACING_FORMATS:
        raise TableFormatError(
            f"{fmt} tables have no {OVERWRITE_SCHEMA_OPTION}: evolve the schema with "
            f"{MERGE_SCHEMA_OPTION}, or drop and create the table")
    if merge_schema and fmt not in EVOLVING_FORMATS and not overwrite_schema:
        raise TableFormatError(
            f"{fmt} tables have no {MERGE_SCHEMA_OPTION}: every file carries the whole schema; "
            f"change it with an overwrite and {OVERWRITE_SCHEMA_OPTION}")


def fit_schema(current: pa.Schema | None, incoming: pa.Schema, *, fmt: str, table: str,
               overwrite: bool, merge_schema: bool = False,
               overwrite_schema: bool = False) -> SchemaFit:
    """The schema to write ``incoming`` into a ``fmt`` table whose schema is ``current`` (None:
    the table has none yet, so the DataFrame's becomes it)."""
    import pyarrow as pa

    check_schema_options(fmt, overwrite=overwrite, merge_schema=merge_schema,
                         overwrite_schema=overwrite_schema)
    if current is None:
        return SchemaFit(incoming)
    if overwrite_schema:
        return SchemaFit(incoming, replaced=not _same_columns(current, incoming))
    merge = merge_schema and fmt in EVOLVING_FORMATS
    iceberg = fmt == "iceberg"
    fields: list[pa.Field] = []
    problems: list[tuple[str, str]] = []
    promoted: list[str] = []
    for column in current:
        index = incoming.get_field_index(column.name)
        if index < 0:
            if column.nullable:
                fields.append(column)  # written as nulls
            else:
                problems.append((column.name, "is required by the table and missing from "
                                              "the DataFrame"))
            continue
        given = incoming.field(index)
        if _same_type(given.type, column.type):
            fields.append(given)
        elif _widens(given.type, column.type):  # cast up on write
            fields.append(pa.field(column.name, column.type, nullable=given.nullable))
        elif merge and iceberg and _iceberg_promotes(column.type, given.type):
            fields.append(given)
            promoted.append(column.name)
        else:
            why = "wider than" if _widens(column.type, given.type) else "not"
            problems.append((column.name, f"is {_spelled(given.type)} in the DataFrame, {why} "
                                          f"the table's {_spelled(column.type)}"))
    extra = [f for f in incoming if current.get_field_index(f.name) < 0]
    if extra and merge:
        fields.extend(f.with_nullable(True) for f in extra)
    elif extra:
        problems.extend((f.name, "is not in the table") for f in extra)
    if problems:
        raise SchemaMismatchError(table, problems, _hint(fmt, overwrite))
    return SchemaFit(pa.schema(fields), added=tuple(f.name for f in extra),
                     promoted=tuple(promoted))


def conform_batch(batch: pa.RecordBatch, schema: pa.Schema) -> pa.RecordBatch:
    """``batch`` in exactly ``schema``: columns by name, in its order, cast where the types'
    spellings differ, and a column the batch lacks as nulls."""
    import pyarrow as pa

    if batch.schema.equals(schema):
        return batch
    columns = []
    for field in schema:
        index = batch.schema.get_field_index(field.name)
        if index < 0:
            columns.append(pa.nulls(batch.num_rows, field.type))
            continue
        column = batch.column(index)
        columns.append(column if column.type.equals(field.type) else column.cast(field.type))
    return pa.RecordBatch.from_arrays(columns, schema=schema)


def _hint(fmt: str, overwrite: bool) -> str:
    if fmt in EVOLVING_FORMATS:
        hint = f"option {MERGE_SCHEMA_OPTION}=true adds columns"
        if fmt == "iceberg":
            return hint + " and widens types as Iceberg allows"
        return hint + (f"; {OVERWRITE_SCHEMA_OPTION}=true replaces the schema" if overwrite
                       else "")
    if overwrite:
        return f"option {OVERWRITE_SCHEMA_OPTION}=true replaces the schema"
    return f"an overwrite with {OVERWRITE_SCHEMA_OPTION}=true changes a {fmt} table's schema"


def _same_columns(a: pa.Schema, b: pa.Schema) -> bool:
    return a.names == b.names and all(
        _same_type(x.type, y.type) for x, y in zip(a, b, strict=True))


def _logical(t: pa.DataType) -> pa.DataType:
    """One spelling per logical type: the Arrow variants Spark, Delta and Parquet readers each
    produce for the same column (large and view strings, list kinds, timestamp units)."""
    import pyarrow as pa
    import pyarrow.types as pt

    if pt.is_dictionary(t):
        return _logical(t.value_type)
    if pt.is_string(t) or pt.is_large_string(t) or pt.is_string_view(t):
        return pa.string()
    if pt.is_binary(t) or pt.is_large_binary(t) or pt.is_binary_view(t):
        return pa.binary()
    if pt.is_timestamp(t):
        return pa.timestamp("us", tz="UTC" if t.tz else None)
    if pt.is_date(t):
        return pa.date32()
    if pt.is_list(t) or pt.is_large_list(t) or pt.is_fixed_size_list(t) or pt.is_list_view(t) \
            or pt.is_large_list_view(t):
        return pa.list_(_logical(t.value_type))
    if pt.is_map(t):
        return pa.map_(_logical(t.key_type), _logical(t.item_type))
    if pt.is_struct(t):
        return pa.struct(sorted((pa.field(f.name, _logical(f.type)) for f in t),
                                key=lambda f: f.name))
    return t


def _same_type(given: pa.DataType, table: pa.DataType) -> bool:
    import pyarrow.types as pt

    if pt.is_null(given):  # a column of nulls fits any column
        return True
    return bool(_logical(given).equals(_logical(table)))


_INTS = ("int8", "int16", "int32", "int64")


def _widens(narrow: pa.DataType, wide: pa.DataType) -> bool:
    """Whether every ``narrow`` value is a ``wide`` value (a lossless cast up)."""
    import pyarrow.types as pt

    n, w = str(narrow), str(wide)
    if n in _INTS and w in _INTS:
        return _INTS.index(n) < _INTS.index(w)
    if n == "float" and w == "double":
        return True
    if pt.is_decimal(narrow) and pt.is_decimal(wide):
        return bool(narrow.scale == wide.scale and narrow.precision < wide.precision)
    return False


def _iceberg_promotes(table: pa.DataType, given: pa.DataType) -> bool:
    """Iceberg's allowed type promotions of a table column (int -> long, float -> double,
    decimal(P, S) -> decimal(P', S) with P' > P)."""
    import pyarrow.types as pt

    t, g = str(table), str(given)
    if t == "int32" and g == "int64":
        return True
    if t == "float" and g == "double":
        return True
    return bool(pt.is_decimal(table) and pt.is_decimal(given) and table.scale == given.scale
                and table.precision < given.precision)


def _spelled(t: pa.DataType) -> str:
    return str(_logical(t))
