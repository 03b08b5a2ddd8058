"""Every S3 adapter of TableCredentials, proven by its own library writing and reading real data
on SeaweedFS with a credential vended through the gateway (and refused when read-only)."""

from __future__ import annotations

import subprocess
import sys
import uuid
from collections.abc import Iterator
from typing import Any

import boto3
import botocore.exceptions
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from lakegate_client import Client, TableCredentials
from lakegate_client.engine import stores
from lakegate_client.engine.formats.lance_manifests import newest_version
from lakegate_client.engine.stores.base import S3Location

pytestmark = pytest.mark.integration

ROWS = pa.table({"id": list(range(100)), "name": [f"row-{i}" for i in range(100)]})


class Table:
    """A fresh generic table, with a writer (gRPC over UDS) and a reader (HTTP over UDS)."""

    def __init__(self, devstack: Any, fmt: str) -> None:
        info = devstack.info
        self.ns = info.namespace
        self.name = f"ad_{fmt}_{uuid.uuid4().hex[:8]}"
        wh = info.warehouse.name
        self.writer = Client(f"grpc+unix:{info.gateway.grpc_uds}", warehouse=wh)
        self.reader = Client(f"unix:{info.gateway.uds}", warehouse=wh)
        self.writer.create(self.ns, self.name, format=fmt)

    def write_creds(self) -> TableCredentials:
        return self.writer.credentials(self.ns, self.name, access="write")

    def read_creds(self) -> TableCredentials:
        return self.reader.credentials(self.ns, self.name, access="read")

    def close(self) -> None:
        self.writer.drop(self.ns, self.name, purge=True)
        self.writer.close()
        self.reader.close()


@pytest.fixture
def table(devstack: Any, request: pytest.FixtureRequest) -> Iterator[Table]:
    t = Table(devstack, getattr(request, "param", "parquet"))
    yield t
    t.close()


def key_of(creds: TableCredentials, leaf: str) -> str:
    return f"{creds.location.split('://', 1)[1].split('/', 1)[1].rstrip('/')}/{leaf}"


@pytest.mark.parametrize("table", ["lance"], indirect=True)
def test_lance_writes_and_reads_with_vended_options(table: Table) -> None:
    import lance

    creds = table.write_creds()
    lance.write_dataset(ROWS, creds.uri, storage_options=creds.lance_storage_options())
    lance.write_dataset(
        ROWS, creds.uri, mode="append", storage_options=creds.lance_storage_options()
    )
    read = table.read_creds()
    dataset = lance.dataset(read.uri, storage_options=read.lance_storage_options())
    assert dataset.count_rows() == 200
    assert dataset.to_table(filter="id = 7")["name"].to_pylist() == ["row-7", "row-7"]
    # a Spark write's planning reads the version from one page of SeaweedFS's listing
    store, where = stores.table_store(creds), S3Location.parse(creds.location)
    assert newest_version(store, where) == dataset.version == 2


@pytest.mark.parametrize("table", ["delta"], indirect=True)
def test_deltalake_writes_and_reads_with_vended_options(table: Table) -> None:
    import deltalake

    creds = table.write_creds()
    deltalake.write_deltalake(creds.uri, ROWS, storage_options=creds.delta_storage_options())
    deltalake.write_deltalake(
        creds.uri, ROWS, mode="append", storage_options=creds.delta_storage_options()
    )
    read = table.read_creds()
    delta = deltalake.DeltaTable(read.uri, storage_options=read.delta_storage_options())
    assert delta.version() == 1
    assert delta.to_pyarrow_table().num_rows == 200


@pytest.mark.parametrize("table", ["csv"], indirect=True)
def test_s3fs_writes_and_reads_with_vended_kwargs(table: Table) -> None:
    import fsspec
    import s3fs

    creds = table.write_creds()
    path = f"{creds.bucket}/{key_of(creds, 'data.csv')}"
    fs = s3fs.S3FileSystem(skip_instance_cache=True, **creds.fsspec_kwargs())
    with fs.open(path, "wb") as handle:
        handle.write(b"id,name\n1,a\n2,b\n")
    read = table.read_creds()
    reader_fs = s3fs.S3FileSystem(skip_instance_cache=True, **read.fsspec_kwargs())
    assert reader_fs.cat(path) == b"id,name\n1,a\n2,b\n"
    with fsspec.open(
        f"s3://{path}", "rb", skip_instance_cache=True, **read.fsspec_kwargs()
    ) as handle:
        assert handle.read().startswith(b"id,name")
    # pandas hands storage_options to fsspec unchanged.
    import pandas as pd

    frame = pd.read_csv(f"s3://{path}", storage_options=read.fsspec_kwargs())
    assert frame["name"].tolist() == ["a", "b"]


def test_pyarrow_filesystem_writes_and_reads_parquet(table: Table) -> None:
    creds = table.write_creds()
    path = f"{creds.bucket}/{key_of(creds, 'part-0.parquet')}"
    pq.write_table(ROWS, path, filesystem=creds.pyarrow_filesystem())
    read = table.read_creds()
    assert pq.read_table(path, filesystem=read.pyarrow_filesystem()).equals(ROWS)


def test_boto3_puts_and_gets_with_vended_kwargs(table: Table) -> None:
    creds = table.write_creds()
    key = key_of(creds, "blob.bin")
    boto3.client("s3", **creds.boto3_kwargs()).put_object(
        Bucket=creds.bucket, Key=key, Body=b"payload"
    )
    read = table.read_creds()
    body = boto3.client("s3", **read.boto3_kwargs()).get_object(Bucket=read.bucket, Key=key)
    assert body["Body"].read() == b"payload"


def test_env_configures_an_unmodified_aws_sdk_process(table: Table) -> None:
    creds = table.write_creds()
    key = key_of(creds, "from-env.txt")
    script = (
        "import boto3, sys\n"
        "s3 = boto3.client('s3')\n"
        "s3.put_object(Bucket=sys.argv[1], Key=sys.argv[2], Body=b'env')\n"
        "print(s3.get_object(Bucket=sys.argv[1], Key=sys.argv[2])['Body'].read().decode())\n"
    )
    env = {
        **creds.env(),
        "PATH": "/usr/bin:/bin",
        "AWS_CONFIG_FILE": "/dev/null",
        "AWS_SHARED_CREDENTIALS_FILE": "/dev/null",
        "NO_PROXY": "127.0.0.1,localhost",
    }
    out = subprocess.run(
        [sys.executable, "-c", script, creds.bucket, key],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr[-1000:]
    assert out.stdout.strip() == "env"


def test_read_only_credential_cannot_write(table: Table) -> None:
    import lance

    read = table.read_creds()
    assert read.access == "read"
    with pytest.raises(botocore.exceptions.ClientError) as info:
        boto3.client("s3", **read.boto3_kwargs()).put_object(
            Bucket=read.bucket, Key=key_of(read, "nope.bin"), Body=b"x"
        )
    assert info.value.response["Error"]["Code"] == "AccessDenied"
    path = f"{read.bucket}/{key_of(read, 'nope.parquet')}"
    with pytest.raises(OSError, match=r"(?i)denied|403"):
        pq.write_table(ROWS, path, filesystem=read.pyarrow_filesystem())
    with pytest.raises(OSError, match=r"(?i)denied|403|forbidden"):
        lance.write_dataset(
            ROWS, read.uri + "/nope.lance", storage_options=read.lance_storage_options()
        )
    # ...while the write credential for the same table can.
    write = table.write_creds()
    pq.write_table(ROWS, path, filesystem=write.pyarrow_filesystem())
