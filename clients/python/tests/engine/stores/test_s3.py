"""Deleting many objects: one DeleteObjects where the store takes it, single deletes where not."""

from __future__ import annotations

from typing import Any

import botocore.exceptions
import pytest

from lakegate_client.engine.stores import delete_all
from lakegate_client.engine.stores import s3 as s3_store
from lakegate_client.engine.stores.s3 import BatchDeletes, S3Store

from .fake_adls import FakeAdls
from .fake_s3 import FakeS3, Fault


def _filled(s3: FakeS3, n: int) -> list[str]:
    keys = [f"t/k{i:04d}" for i in range(n)]
    for key in keys:
        s3.put_object(Bucket="b", Key=key, Body=b"x")
    s3.calls.clear()
    return keys


def _ops(s3: FakeS3) -> list[str]:
    return [op for op, _ in s3.calls]


def test_many_keys_go_in_one_batch_and_a_single_key_alone() -> None:
    s3 = FakeS3()
    keys = _filled(s3, 5)
    S3Store(s3, "b").delete_many([*keys, keys[0]], BatchDeletes())
    assert _ops(s3) == ["DeleteObjects"]
    assert not s3.objects
    keys = _filled(s3, 1)
    S3Store(s3, "b").delete_many(keys, BatchDeletes())
    assert _ops(s3) == ["DeleteObject"]
    assert not s3.objects


def test_batches_hold_at_most_a_thousand_keys() -> None:
    s3 = FakeS3()
    keys = _filled(s3, 2_345)
    S3Store(s3, "b").delete_many(keys, BatchDeletes())
    assert _ops(s3) == ["DeleteObjects"] * 3
    assert not s3.objects


def test_a_store_without_batches_is_remembered_and_every_key_still_goes() -> None:
    s3, batches = FakeS3(batch_deletes=False), BatchDeletes()
    keys = _filled(s3, 4)
    S3Store(s3, "b").delete_many(keys, batches)
    assert _ops(s3) == ["DeleteObjects"] + ["DeleteObject"] * 4
    assert not s3.objects
    assert not batches.allowed("http://fake-s3")
    keys = _filled(s3, 4)
    S3Store(s3, "b").delete_many(keys, batches)  # no second try at the batch
    assert _ops(s3) == ["DeleteObject"] * 4
    assert not s3.objects
    assert batches.allowed("http://other-s3")


def test_a_server_error_falls_back_once_without_condemning_the_store() -> None:
    s3, batches = FakeS3(), BatchDeletes()
    keys = _filled(s3, 3)
    s3.faults = {1: Fault(code="InternalError", status=500)}
    S3Store(s3, "b").delete_many(keys, batches)
    assert _ops(s3) == ["DeleteObjects"] + ["DeleteObject"] * 3
    assert not s3.objects
    assert batches.allowed("http://fake-s3")


def test_keys_the_batch_reports_as_failed_are_deleted_singly() -> None:
    class Partial(FakeS3):
        def delete_objects(self, *, Bucket: str, Delete: dict[str, Any]) -> dict[str, Any]:
            first = Delete["Objects"][0]["Key"]
            rest = {"Objects": Delete["Objects"][1:], "Quiet": True}
            super().delete_objects(Bucket=Bucket, Delete=rest)
            return {"Errors": [{"Key": first, "Code": "SlowDown"}]}

    s3 = Partial()
    keys = _filled(s3, 3)
    S3Store(s3, "b").delete_many(keys, BatchDeletes())
    assert s3.calls == [("DeleteObjects", keys[1]), ("DeleteObject", keys[0])]
    assert not s3.objects


def test_a_single_delete_that_fails_after_the_fallback_raises() -> None:
    s3 = FakeS3(batch_deletes=False)
    keys = _filled(s3, 3)
    s3.faults = {2: Fault(code="AccessDenied", status=403)}
    with pytest.raises(botocore.exceptions.ClientError, match="AccessDenied"):
        S3Store(s3, "b").delete_many(keys, BatchDeletes())
    assert len(s3.objects) == 1  # the others were still tried


def test_delete_all_uses_the_batch_on_s3_and_single_deletes_elsewhere() -> None:
    s3 = FakeS3()
    keys = _filled(s3, 3)
    delete_all(S3Store(s3, "b"), keys)
    assert _ops(s3) == ["DeleteObjects"]
    adls = FakeAdls()
    for key in keys:
        adls.put(key, b"x")
    delete_all(adls, keys)
    assert adls.list("t/") == {}


def test_the_process_remembers_refusals_in_one_place() -> None:
    assert s3_store.process_batch_deletes() is s3_store.process_batch_deletes()
