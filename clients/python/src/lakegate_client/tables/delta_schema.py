"""``mergeSchema`` on a Delta table: the columns a write adds, committed at planning.

Why a commit of its own: deltalake's ``create_write_transaction`` writes a new schema only with
an overwrite, so the columns an append adds go first, as one metadata-only Delta version
(``alter.add_columns``), nullable (the rows already in the table have none). A job that fails
later leaves the added columns behind, all null, as Iceberg's own writer does with its schema
update; readers of older versions are unaffected.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from lakegate_client.credentials import TableCredentials
    from lakegate_client.tables.schema_fit import SchemaFit

__all__ = ["add_delta_columns"]


def add_delta_columns(creds: TableCredentials, fit: SchemaFit) -> None:
    """Add ``fit.added`` to the Delta table at ``creds.location`` (nothing when there are none,
    or when a rival job's planning added them first)."""
    if not fit.added:
        return
    from deltalake import DeltaTable, Field

    table = DeltaTable(creds.location, storage_options=creds.delta_storage_options())
    present = set(table.schema().to_arrow().names)
    missing = [Field.from_arrow(fit.schema.field(n).with_nullable(True)) for n in fit.added
               if n not in present]
    if missing:
        table.alter.add_columns(missing)
