"""An in-memory Iceberg catalog over local metadata files, with faults at the commit call.

Why: the Iceberg writer's commit decisions (did an ambiguous commit land? may abort delete?)
are checked without a server; pyiceberg's own ``InMemoryCatalog`` needs SQLAlchemy.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pyiceberg.catalog import MetastoreCatalog
from pyiceberg.serializers import FromInputFile
from pyiceberg.table import CommitTableResponse, Table

Fault = Callable[[str], None]  # called with "before" and "after" around each commit


class MemoryCatalog(MetastoreCatalog):
    """Tables by identifier; ``fault`` (when set) may raise before or after a commit lands."""

    def __init__(self, warehouse: str) -> None:
        super().__init__("memory", warehouse=warehouse)
        self.tables: dict[tuple[str, ...], str] = {}
        self.fault: Fault | None = None
        self.commits = 0

    def create_table(self, identifier: Any, schema: Any, location: Any = None,
                     partition_spec: Any = None, sort_order: Any = None,
                     properties: Any = None) -> Table:
        ident = self.identifier_to_tuple(identifier)
        staged = self._create_staged_table(ident, schema, location, properties=properties or {})
        self._write_metadata(staged.metadata, staged.io, staged.metadata_location)
        self.tables[ident] = staged.metadata_location
        return self.load_table(ident)

    def load_table(self, identifier: Any) -> Table:
        ident = self.identifier_to_tuple(identifier)
        location = self.tables[ident]
        io = self._load_file_io(location=location)
        metadata = FromInputFile.table_metadata(io.new_input(location))
        return Table(ident, metadata, location, io, self)

    def commit_table(self, table: Table, requirements: Any, updates: Any) -> CommitTableResponse:
        if self.fault is not None:
            self.fault("before")
        ident = self.identifier_to_tuple(table.name())
        current = MemoryCatalog.load_table(self, ident)  # the catalog's own read, not a call
        staged = self._update_and_stage_table(current, ident, requirements, updates)
        self._write_metadata(staged.metadata, staged.io, staged.metadata_location)
        self.tables[ident] = staged.metadata_location
        self.commits += 1
        if self.fault is not None:
            self.fault("after")
        return CommitTableResponse(metadata=staged.metadata,
                                   metadata_location=staged.metadata_location)

    def load_namespace_properties(self, namespace: Any) -> dict[str, str]:
        return {}

    def _unused(self, *_: Any, **__: Any) -> Any:
        raise NotImplementedError

    create_namespace = drop_namespace = drop_table = drop_view = list_namespaces = _unused
    list_tables = list_views = load_view = _unused
    register_table = register_view = rename_table = update_namespace_properties = _unused
    view_exists = _unused
