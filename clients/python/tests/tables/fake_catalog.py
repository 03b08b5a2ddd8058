"""Enough of ``Client`` for planning a write (``ensure_table``): load, create and drop of
generic tables in memory, and one fixed credential for every table."""

from __future__ import annotations

from lakegate_client import NotFoundError, TableCredentials
from lakegate_client._models import LoadedTable


class FakeCatalog:
    """Tables by name (``tables``: name -> format); ``dropped`` records every drop."""

    def __init__(self, location: str, tables: dict[str, str] | None = None,
                 creds: TableCredentials | None = None) -> None:
        self.location = location
        self.tables = dict(tables or {})
        self.dropped: list[str] = []
        self._creds = creds

    def load(self, namespace: list[str], table: str, warehouse: str | None = None) -> LoadedTable:
        if table not in self.tables:
            raise NotFoundError(f"no table {table}")
        return LoadedTable(tuple(namespace), table, self.tables[table], self.location)

    def create(self, namespace: list[str], table: str, format: str,
               warehouse: str | None = None) -> LoadedTable:
        self.tables[table] = format
        return self.load(namespace, table)

    def drop(self, namespace: list[str], table: str, warehouse: str | None = None) -> None:
        del self.tables[table]
        self.dropped.append(table)

    def credentials(self, namespace: list[str], table: str, **_kw: object) -> TableCredentials:
        assert self._creds is not None, "this fake was made without a credential"
        return self._creds
