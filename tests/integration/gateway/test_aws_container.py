"""boto3, unmodified, reads a table's objects with AWS_CONTAINER_CREDENTIALS_FULL_URI → gateway."""

from __future__ import annotations

from urllib.parse import urlparse

import boto3
import pytest
from botocore.config import Config

from devstack.stack_info import StackInfo

pytestmark = pytest.mark.integration


def _bucket_key(location: str) -> tuple[str, str]:
    parsed = urlparse(location)
    return parsed.netloc, parsed.path.lstrip("/")


def test_boto3_reads_table_objects_through_the_container_endpoint(
    info: StackInfo, new_table, monkeypatch: pytest.MonkeyPatch, tmp_path
) -> None:
    table = new_table(prefix="aws")
    bucket, prefix = _bucket_key(table["table"]["base_location"])
    s3 = info.s3
    admin = boto3.session.Session(
        aws_access_key_id=s3.admin_access_key, aws_secret_access_key=s3.admin_secret_key,
        region_name=s3.region,
    ).client("s3", endpoint_url=s3.endpoint)
    admin.put_object(Bucket=bucket, Key=f"{prefix}/data/part-0.txt", Body=b"hello lakegate")

    for var in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE",
                "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI", "AWS_WEB_IDENTITY_TOKEN_FILE"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.setenv(
        "AWS_CONTAINER_CREDENTIALS_FULL_URI",
        f"{info.gateway_url}/v1/aws-credentials/demo/{table['namespace']}/"
        f"{table['table']['name']}?access=read",
    )
    monkeypatch.setenv("AWS_CONTAINER_AUTHORIZATION_TOKEN", "any-value-in-mode-none")

    session = boto3.session.Session(region_name=s3.region)
    creds = session.get_credentials()
    assert creds is not None
    assert creds.method == "container-role"
    client = session.client("s3", endpoint_url=s3.endpoint,
                            config=Config(s3={"addressing_style": "path"}))
    listed = client.list_objects_v2(Bucket=bucket, Prefix=prefix + "/")
    assert [o["Key"] for o in listed["Contents"]] == [f"{prefix}/data/part-0.txt"]
    body = client.get_object(Bucket=bucket, Key=f"{prefix}/data/part-0.txt")["Body"].read()
    assert body == b"hello lakegate"
    # A read credential is scoped to the table: writing or reading elsewhere is refused.
    with pytest.raises(client.exceptions.ClientError):
        client.put_object(Bucket=bucket, Key=f"{prefix}/data/evil.txt", Body=b"x")
