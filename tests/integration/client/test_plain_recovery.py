"""A plain-table commit whose driver died after its first upload completion is finished by the
next read (issue 32): real stack, vended credentials, the client's ``read_table``."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from typing import Any

import boto3
import pyarrow as pa
import pytest

from lakegate_client import Client
from lakegate_client.engine.formats.plain import CommitTiming, commit_plain, plan_plain
from lakegate_client.engine.staged import stage_parquet
from lakegate_client.engine.stores.base import S3Location
from lakegate_client.tables import read_table, write_table

pytestmark = pytest.mark.integration


class _Died(BaseException):
    """The simulated driver died here."""


class _DiesAt:
    """A boto3 client that dies at the ``nth`` call of ``op`` (nothing after it runs)."""

    def __init__(self, s3: Any, op: str, nth: int) -> None:
        self._s3, self._op, self._nth, self._seen = s3, op, nth, 0

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._s3, name)
        if name != self._op:
            return attr

        def call(*args: Any, **kwargs: Any) -> Any:
            self._seen += 1
            if self._seen >= self._nth:
                raise _Died(name)
            return attr(*args, **kwargs)

        return call


@pytest.fixture
def client(devstack: Any) -> Iterator[tuple[Client, str, str]]:
    info = devstack.info
    name = f"recover_{uuid.uuid4().hex[:8]}"
    with Client(info.gateway_url, warehouse=info.warehouse.name) as c:
        yield c, info.namespace, name
        c.drop(info.namespace, name, purge=True)


def test_the_next_read_finishes_a_commit_whose_driver_died(
    client: tuple[Client, str, str],
) -> None:
    c, ns, name = client
    write_table(c, ns, name, pa.table({"id": list(range(10))}), format="parquet", create=True)
    creds = c.credentials(ns, name, access="write")
    s3 = boto3.session.Session().client("s3", **creds.boto3_kwargs())
    where = S3Location.parse(creds.location)
    plan = plan_plain(s3, where, "parquet")
    schema = pa.schema([("id", pa.int64())])
    wid = uuid.uuid4().hex
    uploads = [
        stage_parquet(s3, where.bucket, where.key(f"part-{wid}-{i:05d}-x.parquet"), schema,
                      [pa.record_batch([pa.array(range(100 + 10 * i, 110 + 10 * i))],
                                       schema=schema)])
        for i in range(2)
    ]
    an_hour_ago = CommitTiming(now=lambda: time.time() - 3600)
    with pytest.raises(_Died):
        commit_plain(_DiesAt(s3, "complete_multipart_upload", 2), where, "parquet", plan,
                     uploads, overwrite=True, write_id=wid, timing=an_hour_ago)
    # torn: the old file and the first new one are visible, the intent says what is left
    keys = [o["Key"] for o in s3.list_objects_v2(Bucket=where.bucket,
                                                 Prefix=f"{where.prefix}/")["Contents"]]
    assert sum(k.endswith(".parquet") for k in keys) == 2
    assert any("_lakegate_intent-" in k for k in keys)

    got = read_table(c, ns, name).column("id").to_pylist()

    assert sorted(got) == list(range(100, 120))
    keys = [o["Key"] for o in s3.list_objects_v2(Bucket=where.bucket,
                                                 Prefix=f"{where.prefix}/")["Contents"]]
    assert not [k for k in keys if "_lakegate_intent-" in k]
