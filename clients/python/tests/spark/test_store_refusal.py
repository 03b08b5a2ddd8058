"""A Spark write to a plain table on a store that ignores conditional PUTs is refused before
anything is written, unless ``accept_single_writer_risk`` says so (issue 32 finding 3)."""

from __future__ import annotations

from typing import Any

import pytest

from lakegate_client.tables.catalog import TableInfo

from ..tables.fake_s3 import FakeS3

pytest.importorskip("pyspark")


def _writer(monkeypatch: pytest.MonkeyPatch, s3: FakeS3, options: dict[str, str]) -> Any:
    from pyspark.sql.types import LongType, StructField, StructType

    from lakegate_client.spark import datasource
    from lakegate_client.tables.conditional_writes import ConditionalWriteProbe

    creds = type("C", (), {"location": "s3://b/wh/t1", "storage": "s3",
                           "pyarrow_filesystem": lambda self: None})()
    info = TableInfo(namespace=("wh",), name="t1", format="parquet", location="s3://b/wh/t1")
    monkeypatch.setattr(datasource, "client_for", lambda _url: None)
    monkeypatch.setattr(datasource.tables, "ensure_table", lambda *_a, **_k: info)
    monkeypatch.setattr(datasource, "table_credentials", lambda *_a, **_k: creds)
    monkeypatch.setattr(datasource, "convert_to_plain", lambda *_a: False)
    monkeypatch.setattr(datasource, "s3_client", lambda _c: s3)
    probe = ConditionalWriteProbe()  # a fresh memory per test
    monkeypatch.setattr(datasource, "process_probe", lambda: probe)
    source = datasource.LakekeeperDataSource({"table": "wh.t1", **options})
    return source.writer(StructType([StructField("id", LongType())]), True)


def test_a_store_ignoring_conditional_puts_is_refused_before_anything_is_written(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from lakegate_client.tables.conditional_writes import UnsafeStoreError

    s3 = FakeS3(honours_conditions=False)
    with pytest.raises(UnsafeStoreError, match="accept_single_writer_risk"):
        _writer(monkeypatch, s3, {})
    assert s3.objects == {}
    assert s3.uploads == {}


def test_accepting_the_single_writer_risk_plans_the_write(monkeypatch: pytest.MonkeyPatch) -> None:
    writer = _writer(monkeypatch, FakeS3(honours_conditions=False),
                     {"accept_single_writer_risk": "true"})
    assert writer._plan.plain is not None


def test_a_store_honouring_them_plans_the_write(monkeypatch: pytest.MonkeyPatch) -> None:
    s3 = FakeS3()
    writer = _writer(monkeypatch, s3, {})
    assert writer._plan.plain is not None
    assert s3.objects == {}  # the probe cleaned up after itself
