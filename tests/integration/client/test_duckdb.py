"""lakegate_client.duckdb on the real local stack: every table format read through the gateway.

Generic tables (parquet, csv, delta, lance) are written by lakegate_client.tables with vended
credentials, then read by DuckDB with the scoped secret connect_table made from the table's
credential; Iceberg is written by pyiceberg through the gateway and read by DuckDB through the
gateway's Iceberg REST catalog (ATTACH). Exact row counts and sums; for Iceberg the emulator's
counters prove warm reads cost the catalog no credential call.
"""

from __future__ import annotations

import uuid
from typing import Any

import pyarrow as pa
import pytest
from pyiceberg.catalog.rest import RestCatalog

from devstack.hooks import EmulatorHooks
from lakegate_client import Client
from lakegate_client.duckdb import connect_table, connect_warehouse
from lakegate_client.tables import write_table

pytestmark = pytest.mark.integration

# Credential calls the catalog can be asked for, whatever the table kind.
CREDENTIAL_CALLS = ("load_table_credentials", "load_table_vended",
                    "load_generic_table_credentials", "sts_assume_role")


def rows(start: int, count: int) -> pa.Table:
    ids = list(range(start, start + count))
    return pa.table({"id": pa.array(ids, pa.int64()), "name": [f"r{i}" for i in ids]})


@pytest.fixture
def client(devstack: Any) -> Any:
    with Client(devstack.info.gateway_url, warehouse=devstack.info.warehouse.name) as c:
        yield c


@pytest.mark.parametrize("fmt", ["parquet", "csv", "delta", "lance"])
def test_generic_tables_read_through_the_gateway_with_exact_counts(
    fmt: str, client: Client, devstack: Any
) -> None:
    ns, name = devstack.info.namespace, f"duck_{fmt}_{uuid.uuid4().hex[:8]}"
    write_table(client, ns, name, rows(0, 37), format=fmt, create=True)
    write_table(client, ns, name, rows(37, 26), format=fmt)
    try:
        with connect_table(client, ns, name) as table:
            assert table.format == fmt
            got = table.sql("SELECT count(*), sum(id), max(name) FROM {table}").fetchone()
            assert got == (63, sum(range(63)), "r9")
            assert table.secret_replacements == 0
    finally:
        client.drop(ns, name, purge=True)


def test_iceberg_through_the_gateway_catalog_and_warm_reads_make_no_credential_call(
    client: Client, devstack: Any, emulator: EmulatorHooks
) -> None:
    info = devstack.info
    rest = RestCatalog(
        "gateway", uri=info.gateway_url + "/catalog", warehouse=info.warehouse.name,
        **{"header.X-Lakegate-Request": "1",
           "header.X-Iceberg-Access-Delegation": "vended-credentials"},
    )
    ident = (info.namespace, f"duck_ice_{uuid.uuid4().hex[:8]}")
    table = rest.create_table(ident, schema=rows(0, 1).schema)
    table.append(rows(0, 40))
    table.append(rows(40, 15))
    con = connect_warehouse(client, alias="lake")
    try:
        query = f"SELECT count(*), sum(id) FROM lake.{ident[0]}.{ident[1]}"  # noqa: S608
        assert con.sql(query).fetchone() == (55, sum(range(55)))  # cold: may fetch once
        emulator.reset()
        for _ in range(3):
            assert con.sql(query).fetchone() == (55, sum(range(55)))
        stats = emulator.stats()
        assert stats["load_table"] >= 1  # the reads really went to the catalog for metadata
        assert {k: stats[k] for k in CREDENTIAL_CALLS} == dict.fromkeys(CREDENTIAL_CALLS, 0)
    finally:
        con.close()
        rest.drop_table(ident)
