"""The write benchmark's store tally against the stack's real SeaweedFS: its metrics endpoint
counts each S3 request by type, and a tally between two snapshots holds exactly the requests
made in between (the bench splits a write's cost into the format's own calls and the data
source's protocol calls with it)."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from loadtest.store_requests import StoreRequests
from tests.integration.s3_clients import admin_s3

pytestmark = pytest.mark.integration


def test_a_tally_counts_the_requests_made_between_two_snapshots_by_type(devstack: Any) -> None:
    info = devstack.info
    assert info.s3.metrics_url is not None
    s3 = admin_s3(info)
    bucket = f"tally-{uuid.uuid4().hex[:12]}"  # this test's requests alone
    s3.create_bucket(Bucket=bucket)
    tally = StoreRequests(info.s3.metrics_url, bucket)
    before = tally.snapshot()
    for n in range(3):
        s3.put_object(Bucket=bucket, Key=f"k/{n}", Body=b"x" * 10)
    s3.get_object(Bucket=bucket, Key="k/0")["Body"].read()
    s3.list_objects_v2(Bucket=bucket, Prefix="k/")
    s3.put_object(Bucket=info.s3.bucket, Key=f"tally/{bucket}", Body=b"")  # another bucket's
    tally.count("three puts", before)

    counted = tally.per_write("three puts")
    assert counted is not None
    assert counted["writes"] == 1
    assert counted["requests"] == {"GET": 1.0, "LIST": 1.0, "PUT": 3.0}
    server_ms = counted["server_ms"]
    assert isinstance(server_ms, dict)
    assert set(server_ms) == {"GET", "LIST", "PUT"}
    assert all(ms > 0 for ms in server_ms.values())
