"""A Spark write to a plain or an Iceberg table on a store that ignores conditional PUTs is
refused before anything is written, unless ``accept_single_writer_risk`` says so (issue 32
finding 3)."""

from __future__ import annotations

from typing import Any

import pytest

from lakegate_client.engine.stores import s3 as s3_store
from lakegate_client.tables.catalog import TableInfo

from ..engine.stores.fake_s3 import FakeS3

pytest.importorskip("pyspark")


def _writer(monkeypatch: pytest.MonkeyPatch, s3: FakeS3, options: dict[str, str]) -> Any:
    from pyspark.sql.types import LongType, StructField, StructType

    from lakegate_client.engine.conditional_writes import ConditionalWriteProbe
    from lakegate_client.spark import datasource

    creds = type("C", (), {"location": "s3://b/wh/t1", "storage": "s3",
                           "pyarrow_filesystem": lambda self: None})()
    info = TableInfo(namespace=("wh",), name="t1", format="parquet", location="s3://b/wh/t1")
    monkeypatch.setattr(datasource, "client_for", lambda _url: None)
    monkeypatch.setattr(datasource.tables, "ensure_table", lambda *_a, **_k: info)
    monkeypatch.setattr(datasource, "table_schema", lambda *_a: None)  # no data yet
    monkeypatch.setattr(datasource, "table_credentials", lambda *_a, **_k: creds)
    monkeypatch.setattr(datasource, "convert_to_plain", lambda *_a: False)
    monkeypatch.setattr(s3_store, "s3_client", lambda _c: s3)
    probe = ConditionalWriteProbe()  # a fresh memory per test
    monkeypatch.setattr(datasource, "process_probe", lambda: probe)
    source = datasource.LakekeeperDataSource({"table": "wh.t1", **options})
    return source.writer(StructType([StructField("id", LongType())]), True)


def test_a_store_ignoring_conditional_puts_is_refused_before_anything_is_written(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from lakegate_client.engine.conditional_writes import UnsafeStoreError

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


def _iceberg_writer(monkeypatch: pytest.MonkeyPatch, s3: FakeS3,
                    options: dict[str, str]) -> list[str]:
    """Plans an Iceberg write on ``s3``; returns the write ids whose intent planning wrote."""
    import pyarrow as pa

    from lakegate_client.engine.conditional_writes import ConditionalWriteProbe
    from lakegate_client.engine.stores.base import S3Location
    from lakegate_client.engine.stores.s3 import S3Store
    from lakegate_client.spark import iceberg
    from lakegate_client.spark.options import SourceOptions

    schema = pa.schema([("id", pa.int64())])
    table = type("T", (), {"location": lambda self: "s3://b/wh/t1",
                           "schema": lambda self: type("S", (), {})()})()
    started: list[str] = []
    monkeypatch.setattr(iceberg, "ensure_table", lambda *_a: table)
    monkeypatch.setattr("pyiceberg.io.pyarrow.schema_to_pyarrow", lambda *_a, **_k: schema)
    monkeypatch.setattr(iceberg, "recover_iceberg_jobs", lambda *_a, **_k: None)
    monkeypatch.setattr(iceberg, "node_credentials", lambda *_a: type("C", (), {"storage": "s3"})())
    monkeypatch.setattr(iceberg, "job_store",
                        lambda _c: (S3Store(s3, "b"), S3Location.parse("s3://b/wh/t1")))
    monkeypatch.setattr(iceberg, "start_job",
                        lambda _c, _f, write_id, **_k: started.append(write_id) or object())
    probe = ConditionalWriteProbe()
    monkeypatch.setattr(iceberg, "process_probe", lambda: probe)
    opts = SourceOptions.parse({"table": "wh.t1", "format": "iceberg", **options})
    iceberg.iceberg_writer(opts, schema, False)
    return started


def test_an_iceberg_write_on_a_store_ignoring_conditional_puts_is_refused_before_its_intent(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Regression: an Iceberg job wrote its intent without the probe, though a recoverer's
    takeover of the intent and the job's fence that must lose to it are conditional PUTs."""
    from lakegate_client.engine.conditional_writes import UnsafeStoreError

    s3 = FakeS3(honours_conditions=False)
    started: list[str] = []
    with pytest.raises(UnsafeStoreError, match="accept_single_writer_risk"):
        started = _iceberg_writer(monkeypatch, s3, {})
    assert started == []
    assert s3.objects == {}


@pytest.mark.parametrize(("s3", "options"), [
    (FakeS3(), {}),
    (FakeS3(honours_conditions=False), {"accept_single_writer_risk": "true"}),
])
def test_an_iceberg_write_on_a_store_honouring_them_or_accepting_the_risk_is_planned(
    monkeypatch: pytest.MonkeyPatch, s3: FakeS3, options: dict[str, str],
) -> None:
    assert len(_iceberg_writer(monkeypatch, s3, options)) == 1
    assert s3.objects == {}  # the probe cleaned up after itself
