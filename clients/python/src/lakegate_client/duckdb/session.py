"""DuckDB connections made ready for one table or one warehouse through the node's gateway.

- :func:`connect_table`: a scoped secret (S3, or Lance's own) from the table's vended
  credential. Before every query the credential is asked again from the client's per-process
  memo (no network while it is fresh); when the memo has refreshed it, the secret is replaced,
  so a long-lived connection never reads with an expired key.
- :func:`connect_warehouse`: the gateway's Iceberg REST catalog ATTACHed with a bearer-token
  secret; the gateway merges each table's cached credential into every table load, so DuckDB's
  Iceberg reads need no secret of ours and warm reads cost the catalog no credential call.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import TYPE_CHECKING

from lakegate_client._errors import ConfigurationError
from lakegate_client._models import Access
from lakegate_client.credentials import TableCredentials
from lakegate_client.duckdb.extensions import connect
from lakegate_client.duckdb.sql import (
    duckdb_location,
    iceberg_attach_sql,
    iceberg_token_secret_sql,
    scan_expression,
    table_secret_sql,
)

if TYPE_CHECKING:
    import duckdb

    from lakegate_client._client import Client

__all__ = ["TABLE", "TableConnection", "connect_table", "connect_warehouse"]

# What `TableConnection.sql` replaces with the table's scan expression.
TABLE = "{table}"
# Sent when the client has no token: any bearer token passes the gateway's anti-forgery check
# (a browser cannot forge an Authorization header); a token-mode gateway wants a real one.
_LOCAL_TOKEN = "lakegate-local"  # noqa: S105 - a placeholder, not a secret


def _credential_identity(creds: TableCredentials) -> tuple[str, int | None, str]:
    """What changes when the memo refreshes a credential (never the secret itself)."""
    access_key = next(
        (v for k, v in creds.config.items() if k.endswith("access-key-id")), ""
    )
    return (creds.location, creds.expires_at_ms, access_key)


class TableConnection:
    """A DuckDB connection holding one table's scoped secret, kept fresh from the client's memo.

    Attributes:
        con: the DuckDB connection (yours to use; close with :meth:`close`).
        format: the table's format (``parquet``, ``csv``, ``json``, ``delta``, ``lance``).
        scan: the FROM-clause expression reading the table (``read_parquet('s3://...')``).
    """

    def __init__(
        self,
        client: Client,
        namespace: str | Sequence[str],
        table: str,
        *,
        warehouse: str | None = None,
        access: Access = "read",
        con: duckdb.DuckDBPyConnection | None = None,
    ) -> None:
        self._client = client
        self._args = (namespace, table, warehouse, access)
        loaded = client.load(namespace, table, warehouse=warehouse)
        self.format = loaded.format.lower()
        # Every later credential is for this table: a replaced one is a clear
        # TableIdentityMismatchError, never the new table's keys under the old scan.
        self._location = loaded.base_location
        creds = self._credentials()
        self.scan = scan_expression(self.format, duckdb_location(creds))
        self.con = con if con is not None else connect(
            formats=(self.format,), storages=(creds.storage,)
        )
        # Unique per connection object: never id(self), which a collected object hands on.
        self._secret = f"lakegate_{uuid.uuid4().hex}"
        self._installed: tuple[str, int | None, str] | None = None
        self.secret_replacements = 0
        self._install(creds)

    def _credentials(self) -> TableCredentials:
        namespace, table, warehouse, access = self._args
        return self._client.credentials(namespace, table, warehouse=warehouse, access=access,
                                        expected_location=self._location)

    def _install(self, creds: TableCredentials) -> None:
        identity = _credential_identity(creds)
        if identity == self._installed:
            return
        if self._installed is not None:
            self.secret_replacements += 1
        self.con.execute(table_secret_sql(self._secret, self.format, creds))
        self._installed = identity

    def refresh(self) -> bool:
        """Replace the secret if the client now holds another credential; True if it did."""
        before = self.secret_replacements
        self._install(self._credentials())
        return self.secret_replacements != before

    def sql(self, query: str) -> duckdb.DuckDBPyRelation:
        """Run ``query`` with ``{table}`` standing for the table, on a fresh credential."""
        self.refresh()
        return self.con.sql(query.replace(TABLE, self.scan))

    def count(self) -> int:
        """The table's row count."""
        row = self.sql("SELECT count(*) FROM {table}").fetchone()
        return int(row[0]) if row else 0

    def close(self) -> None:
        self.con.close()

    def __enter__(self) -> TableConnection:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def connect_table(
    client: Client,
    namespace: str | Sequence[str],
    table: str,
    *,
    warehouse: str | None = None,
    access: Access = "read",
    con: duckdb.DuckDBPyConnection | None = None,
) -> TableConnection:
    """One call: a DuckDB connection ready to read (or write) a generic table through the gateway.

    >>> with connect_table(Client(), "demo_ns", "orders") as t:
    ...     t.sql("SELECT count(*) FROM {table}").fetchall()

    Raises:
        UnsupportedStorageError: the format or the storage has no DuckDB reader here.
        ConfigurationError: DuckDB or an extension wheel is missing.
    """
    return TableConnection(client, namespace, table, warehouse=warehouse, access=access, con=con)


def connect_warehouse(
    client: Client,
    *,
    warehouse: str | None = None,
    alias: str = "lakegate",
    con: duckdb.DuckDBPyConnection | None = None,
) -> duckdb.DuckDBPyConnection:
    """One call: a DuckDB connection with the warehouse's Iceberg catalog attached as ``alias``.

    Tables are then ``<alias>.<namespace>.<table>``. DuckDB cannot speak HTTP over a Unix socket,
    so the client's URL must be the gateway's loopback TCP address (``http://127.0.0.1:PORT``).

    Raises:
        ConfigurationError: no warehouse, a non-HTTP/TCP gateway URL, or DuckDB missing.
    """
    config = client.config
    endpoint = config.endpoint
    if endpoint.protocol != "http" or endpoint.uds is not None:
        raise ConfigurationError(
            f"DuckDB attaches the gateway's Iceberg catalog over TCP HTTP; {endpoint.url!r} is not"
            " (use LAKEGATE_URL=http://127.0.0.1:PORT)"
        )
    name = warehouse or config.warehouse
    if not name:
        raise ConfigurationError("no warehouse: pass warehouse=... or set LAKEGATE_WAREHOUSE")
    con = con if con is not None else connect(formats=("iceberg",))
    secret = f"{alias}_token"
    con.execute(iceberg_token_secret_sql(secret, config.token or _LOCAL_TOKEN))
    con.execute(iceberg_attach_sql(alias, name, endpoint.http_base_url + "/catalog", secret))
    return con
