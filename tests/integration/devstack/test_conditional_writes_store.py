"""This stack's SeaweedFS honours conditional PUTs: the writers' store probe passes on it, and
its refusals read as conflicts (lakegate_client/engine/conditional_writes.py, issue 32)."""

from __future__ import annotations

import uuid

import pytest

from lakegate_client.engine.conditional_writes import ConditionalWriteProbe, put_conditional
from tests.integration.s3_clients import admin_s3

pytestmark = pytest.mark.integration


def test_the_probe_passes_on_the_stacks_seaweedfs(bare_stack) -> None:
    info = bare_stack.info
    s3 = admin_s3(info)
    prefix = f"probe-test/{uuid.uuid4().hex}"
    ConditionalWriteProbe().ensure(s3, info.s3.bucket, prefix)
    listed = s3.list_objects_v2(Bucket=info.s3.bucket, Prefix=f"{prefix}/")
    assert listed.get("KeyCount", 0) == 0  # the probe cleans up


def test_seaweedfs_refusals_are_conflicts(bare_stack) -> None:
    info = bare_stack.info
    s3, bucket = admin_s3(info), info.s3.bucket
    key = f"probe-test/{uuid.uuid4().hex}/k"
    etag = put_conditional(s3, bucket, key, b"1", None)
    assert etag is not None
    assert put_conditional(s3, bucket, key, b"2", None) is None
    assert put_conditional(s3, bucket, key, b"3", '"0123"') is None
    assert put_conditional(s3, bucket, f"{key}-missing", b"4", etag) is None
    assert put_conditional(s3, bucket, key, b"5", etag) is not None
    s3.delete_object(Bucket=bucket, Key=key)
