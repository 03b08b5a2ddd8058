"""Plans a Spark write to a table on ADLS against the fakes: the data source's planning runs for
real (schema fit, probe, the format's plan), the catalog, the credential and the store are fakes.
Shared by ``test_adls_writes.py`` and ``test_write_planning.py``."""

from __future__ import annotations

from typing import Any

import pytest

from lakegate_client.engine import stores
from lakegate_client.engine.stores.base import S3Location
from lakegate_client.tables.catalog import TableInfo

from ..engine.stores.fake_adls import FakeAdls

LOCATION = "abfss://wh@devstoreaccount1.dfs.core.windows.net/ns/t1"
WHERE = S3Location.parse(LOCATION)


def adls_creds() -> Any:
    """A table credential for ``LOCATION`` (no filesystem: the fake store takes every call)."""
    return type("C", (), {"location": LOCATION, "storage": "adls",
                          "pyarrow_filesystem": lambda self: None,
                          "delta_storage_options": lambda self: {}})()


def plan_adls_write(monkeypatch: pytest.MonkeyPatch, store: FakeAdls, spark_schema: Any,
                    overwrite: bool, fmt: str = "parquet", current: Any = None,
                    **options: str) -> Any:
    """The writer the data source plans for ``ns.t1`` (``current``: the table's schema, None: no
    data yet; ``options``: the write's data source options)."""
    from lakegate_client.engine.conditional_writes import ConditionalWriteProbe
    from lakegate_client.spark import datasource, writer

    info = TableInfo(namespace=("ns",), name="t1", format=fmt, location=LOCATION)
    monkeypatch.setattr(datasource, "client_for", lambda _url: None)
    monkeypatch.setattr(datasource.tables, "ensure_table", lambda *_a, **_k: info)
    monkeypatch.setattr(datasource, "table_schema", lambda *_a: current)
    monkeypatch.setattr(datasource, "table_credentials", lambda *_a, **_k: adls_creds())
    monkeypatch.setattr(datasource, "convert_to_plain", lambda *_a: False)
    monkeypatch.setattr(writer, "table_credentials", lambda *_a, **_k: adls_creds())
    monkeypatch.setattr(stores, "table_store", lambda _c: store)
    probe = ConditionalWriteProbe()
    monkeypatch.setattr(datasource, "process_probe", lambda: probe)
    source = datasource.LakekeeperDataSource({"table": "ns.t1", **options})
    return source.writer(spark_schema, overwrite)
