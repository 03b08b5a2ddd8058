"""The GCS store's own rules (staging names, generations as ETags, the compose tree), on the
in-memory GCS JSON API; tests/integration/client/test_gcs_store.py runs it on fake-gcs-server."""

from __future__ import annotations

import pytest

from lakegate_client.engine.stores.base import PendingUpload
from lakegate_client.engine.stores.gcs import GcsStoreError, _generation, staged_key, staging_prefix
from lakegate_client.tables.directory import is_visible

from .fake_gcs import FakeGcs


def test_staging_names_are_hidden_beside_the_file_and_parse_back() -> None:
    prefix = staging_prefix("wh/t1/a=1/part-w-0.parquet", "u1")
    assert prefix == "wh/t1/a=1/_lakegate_staging/u1/part-w-0.parquet/"
    assert not is_visible(f"{prefix}000001".removeprefix("wh/t1/"))
    assert staged_key(f"{prefix}000001") == ("wh/t1/a=1/part-w-0.parquet", "u1")
    assert staged_key(f"{prefix}c0-000000") == ("wh/t1/a=1/part-w-0.parquet", "u1")
    assert staged_key("_lakegate_staging/u2/f/000001") == ("f", "u2")
    assert staged_key("wh/t1/part-w-0.parquet") is None
    assert staged_key("wh/t1/_lakegate_staging/u1") is None


def test_an_etag_that_is_no_generation_can_never_match() -> None:
    assert _generation('"1700000000000001"') == 1700000000000001
    assert _generation('"0x8D0123456789ABC"') == 1  # no live object has generation 1


def test_more_than_32_parts_compose_as_a_tree_and_leave_no_part() -> None:
    gcs = FakeGcs()
    key = "wh/t1/part-w-00000-a.parquet"
    upload_id = gcs.start_staged(key)
    chunks = [f"{i:04d}".encode() for i in range(70)]
    parts = tuple((i + 1, gcs.stage_part(key, upload_id, i + 1, c)) for i, c in enumerate(chunks))
    gcs.complete_staged(PendingUpload(key, upload_id, parts, 4 * 70))
    assert gcs.objects == {key: b"".join(chunks)}
    composes = [name for op, name in gcs.calls if op == "Compose"]
    assert len(composes) == 4  # three intermediate (32, 32, 6) and the file
    assert composes[-1] == key


def test_a_part_retried_after_a_lost_answer_keeps_its_first_generation() -> None:
    from .fake_s3 import Fault

    gcs = FakeGcs()
    key = "wh/t1/part-w-00000-a.parquet"
    job = gcs.view(faults={1: Fault(after=True)})  # the part landed, its answer was lost
    upload_id = job.start_staged(key)
    with pytest.raises(GcsStoreError):
        job.stage_part(key, upload_id, 1, b"data")
    tag = job.stage_part(key, upload_id, 1, b"data")  # the retry meets ifGenerationMatch=0
    assert tag == gcs.head(f"{staging_prefix(key, upload_id)}000001")


def test_the_probe_refuses_a_gcs_store_that_ignores_upload_preconditions() -> None:
    from lakegate_client.engine.conditional_writes import ConditionalWriteProbe, UnsafeStoreError

    with pytest.raises(UnsafeStoreError, match="accept_single_writer_risk"):
        ConditionalWriteProbe().ensure(FakeGcs(honours_upload_conditions=False), "b", "wh/t1")
    honest = FakeGcs()
    ConditionalWriteProbe().ensure(honest, "b", "wh/t1")
    assert honest.objects == {}
