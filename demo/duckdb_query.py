"""The demo's last step: one DuckDB query over every table the Spark job wrote, through a node's
gateway, and what that query cost in credentials.

Why: the tables are plain Lakekeeper tables, so an engine that is not Spark reads them too, with
credentials from the same node gateway (lakegate_client.duckdb): generic tables through scoped
secrets from their vended credentials, the Iceberg table through the gateway's Iceberg catalog.
The gateway's and the catalog's counters are read just before and just after the query.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from demo.metrics import Counters
from demo.pipeline import PipelineError, PipelineRun, TableResult
from lakegate_client import Client
from lakegate_client.duckdb import TableConnection, connect, connect_warehouse
from lakegate_client.duckdb.sql import literal

ICEBERG_ALIAS = "lake"


@dataclass(frozen=True)
class DuckDBResult:
    """Rows DuckDB counted per table, and the credential traffic the query caused."""

    node: str
    rows: dict[str, int]
    gateway_credential_requests: int  # credential requests the node's gateway served
    catalog_credential_calls: int  # credential calls that reached the catalog (its own count)


def _select(label: str, source: str) -> str:
    return f"SELECT {literal(label)} AS tbl, count(*) AS n FROM {source}"  # noqa: S608


# What DuckDB reads on each store with a vended credential: on ADLS its delta extension does
# not take the azure secret's endpoint, and on GCS it takes HMAC keys only.
_READABLE = {"adls": frozenset({"csv", "json", "parquet", "lance"}), "gcs": frozenset()}


def readable(run_result: PipelineRun, storage: str = "s3") -> list[TableResult]:
    """The run's tables DuckDB can read on ``storage``."""
    formats = _READABLE.get(storage)
    return [t for t in run_result.tables if formats is None or t.format in formats]


def run(
    run_result: PipelineRun,
    node: str,
    gateway_url: str,
    warehouse: str,
    read: Callable[[], Counters],
    storage: str = "s3",
) -> DuckDBResult:
    """Count the rows of every table DuckDB reads on ``storage`` (of ``warehouse``) in one
    DuckDB query through ``gateway_url``; ``read`` reads the counters. Raises
    ``PipelineError`` when a count differs from the rows the Spark job wrote."""
    tables = readable(run_result, storage)
    formats = {t.format for t in tables}
    before = read()
    with Client(gateway_url, warehouse=warehouse) as client:
        con = connect(formats=formats, storages=(storage,))
        try:
            selects, attached = [], False
            for table in tables:
                namespace, name = table.name.rsplit(".", 1)
                if table.format == "iceberg":
                    if not attached:
                        connect_warehouse(client, alias=ICEBERG_ALIAS, con=con)
                        attached = True
                    source = f'{ICEBERG_ALIAS}."{namespace}"."{name}"'
                else:
                    source = TableConnection(client, namespace, name, con=con).scan
                selects.append(_select(table.name, source))
            rows = {str(t): int(n) for t, n in con.sql(" UNION ALL ".join(selects)).fetchall()}
        finally:
            con.close()
    after = read()
    for table in tables:
        if rows.get(table.name) != table.rows_written:
            raise PipelineError(f"{table.name}: Spark wrote {table.rows_written} rows but DuckDB"
                                f" counted {rows.get(table.name)}")
    return DuckDBResult(
        node=node,
        rows=rows,
        gateway_credential_requests=after.gateway_credential_total
        - before.gateway_credential_total,
        catalog_credential_calls=after.upstream_credential_calls
        - before.upstream_credential_calls,
    )
