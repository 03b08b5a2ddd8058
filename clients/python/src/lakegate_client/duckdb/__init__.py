"""DuckDB through the node's gateway: one call makes a connection ready for a table or a warehouse.

>>> from lakegate_client import Client
>>> from lakegate_client.duckdb import connect_table, connect_warehouse
>>> with connect_table(Client(), "demo_ns", "orders") as t:       # parquet/csv/json/delta/lance
...     t.sql("SELECT count(*) FROM {table}").fetchall()
>>> con = connect_warehouse(Client("http://127.0.0.1:8765"))      # Iceberg: lakegate.<ns>.<table>
>>> con.sql("SELECT count(*) FROM lakegate.demo_ns.events").fetchall()

Needs the ``[duckdb]`` extra (``duckdb`` and the ``duckdb-extension-*`` wheels, loaded offline).
"""

from lakegate_client.duckdb.extensions import DUCKDB_EXTRA, EXTENSIONS, connect
from lakegate_client.duckdb.session import (
    TABLE,
    TableConnection,
    connect_table,
    connect_warehouse,
)

__all__ = [
    "DUCKDB_EXTRA",
    "EXTENSIONS",
    "TABLE",
    "TableConnection",
    "connect",
    "connect_table",
    "connect_warehouse",
]
