"""A Spark write to a Lance table on a store that ignores conditional PUTs is refused before
anything is written (issue 32 finding 3): the create claim and the attempt ledger are
conditional PUTs, so on such a store two creators would both win the claim."""

from __future__ import annotations

from typing import Any

import pytest

from lakegate_client.engine.formats import lance as lance_format
from lakegate_client.engine.stores import s3 as s3_store
from lakegate_client.tables.catalog import TableInfo

from ..engine.stores.fake_s3 import FakeS3

pytest.importorskip("pyspark")


def _lance_writer(monkeypatch: pytest.MonkeyPatch, s3: FakeS3, options: dict[str, str]) -> Any:
    from pyspark.sql.types import LongType, StructField, StructType

    from lakegate_client.engine.conditional_writes import ConditionalWriteProbe
    from lakegate_client.spark import datasource

    creds = type("C", (), {"location": "s3://b/wh/t1", "storage": "s3"})()
    info = TableInfo(namespace=("wh",), name="t1", format="lance", location="s3://b/wh/t1")
    monkeypatch.setattr(datasource, "client_for", lambda _url: None)
    monkeypatch.setattr(datasource.tables, "ensure_table", lambda *_a, **_k: info)
    monkeypatch.setattr(datasource, "table_schema", lambda *_a: None)  # no data yet
    monkeypatch.setattr(datasource, "table_credentials", lambda *_a, **_k: creds)
    monkeypatch.setattr(s3_store, "s3_client", lambda _c: s3)  # the probe's and the job intent's
    monkeypatch.setattr(lance_format, "lance_version", lambda _c: None)
    probe = ConditionalWriteProbe()  # a fresh memory per test
    monkeypatch.setattr(datasource, "process_probe", lambda: probe)
    source = datasource.LakekeeperDataSource({"table": "wh.t1", **options})
    return source.writer(StructType([StructField("id", LongType())]), True)


def test_a_lance_write_to_a_store_ignoring_conditional_puts_is_refused(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from lakegate_client.engine.conditional_writes import UnsafeStoreError

    s3 = FakeS3(honours_conditions=False)
    with pytest.raises(UnsafeStoreError, match="accept_single_writer_risk"):
        _lance_writer(monkeypatch, s3, {})
    assert s3.objects == {}


def test_a_lance_write_to_an_honest_store_is_planned(monkeypatch: pytest.MonkeyPatch) -> None:
    s3 = FakeS3()
    writer = _lance_writer(monkeypatch, s3, {})
    assert writer._plan.info.format == "lance"
    # the probe cleaned up after itself; planning wrote the job's intent (engine/job_intent.py)
    assert list(s3.objects) == [f"wh/t1/_lakegate_job-{writer._plan.write_id}.json"]
    assert writer._plan.job
    risky = _lance_writer(monkeypatch, FakeS3(honours_conditions=False),
                          {"accept_single_writer_risk": "true"})
    assert risky._plan.info.format == "lance"
