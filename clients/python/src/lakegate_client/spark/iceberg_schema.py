"""An Iceberg write's schema against its table's, with Iceberg's rules (``tables/schema_fit.py``),
and ``mergeSchema``'s evolution committed at planning, as Iceberg's own Spark writer does.

Why at planning: the tasks write files in the table's schema (field ids included), so a column
``mergeSchema`` adds must be in the table before any task writes; a job that fails later leaves
the added optional columns behind, as Iceberg's writer does.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from lakegate_client.tables.schema_fit import fit_schema

if TYPE_CHECKING:
    import pyarrow as pa
    from pyiceberg.table import Table

    from lakegate_client.spark.options import SourceOptions

__all__ = ["fit_iceberg"]


def fit_iceberg(table: Table, incoming: pa.Schema, opts: SourceOptions,
                overwrite: bool) -> Table:
    """``table`` once the DataFrame schema ``incoming`` fits it (evolved when ``mergeSchema``
    added columns or widened types); raises ``SchemaMismatchError`` naming the columns."""
    from pyiceberg.io.pyarrow import schema_to_pyarrow

    current = schema_to_pyarrow(table.schema(), include_field_ids=False)
    fit = fit_schema(current, incoming, fmt="iceberg", table=opts.qualified_name,
                     overwrite=overwrite, merge_schema=opts.merge_schema,
                     overwrite_schema=opts.overwrite_schema)
    if not fit.evolves:
        return table
    import pyarrow as pa

    changed = pa.schema([fit.schema.field(n).with_nullable(True)
                         for n in (*fit.promoted, *fit.added)])
    with table.update_schema() as update:
        update.union_by_name(changed)
    table.refresh()
    return table
