"""The AWS container-credentials endpoint: the JSON shape botocore reads."""

from __future__ import annotations

from datetime import UTC, datetime

from gateway.models import CredentialSet, StorageCredential
from gateway.surfaces.callers import StaticTokenCallerAuth
from tests.unit.surfaces.conftest import MakeClient, count
from tests.unit.surfaces.fake_operations import (
    NOW_S,
    ROTATED_KEYS,
    SECRET_KEY,
    SESSION_TOKEN,
    FakeOperations,
    RotatingOperations,
)

AWS = "/v1/aws-credentials/demo/demo_ns/orders"


async def test_container_credentials_shape(make_client: MakeClient, metrics) -> None:
    client = await make_client()
    resp = await client.get(AWS, headers={"Authorization": "anything"})
    assert resp.status == 200
    doc = await resp.json()
    assert doc["AccessKeyId"].startswith("ASIA")
    assert doc["SecretAccessKey"] == SECRET_KEY
    assert doc["Token"] == SESSION_TOKEN
    expected = datetime.fromtimestamp(NOW_S + 3600, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    assert doc["Expiration"] == expected
    assert count(metrics, "aws", "credential", "miss") == 1


async def test_raw_token_authorization_as_botocore_sends_it(make_client: MakeClient) -> None:
    client = await make_client(auth=StaticTokenCallerAuth({"tok-carol-99": "carol"}))
    resp = await client.get(AWS, headers={"Authorization": "tok-carol-99"})
    assert resp.status == 200
    resp = await client.get(AWS, headers={"Authorization": "tok-wrong"})
    assert resp.status == 401


async def test_without_authorization_is_forgeable(make_client: MakeClient) -> None:
    client = await make_client()
    resp = await client.get(AWS)
    assert resp.status == 403


async def test_no_s3_credential_is_a_clear_502(
    make_client: MakeClient, fake_ops: FakeOperations, monkeypatch
) -> None:
    def no_s3(table):
        cred = StorageCredential(prefix=table.base_location, config={"adls.sas-token.x": "y"})
        return CredentialSet(credentials=(cred,), expires_at_ms=None, location=table.base_location)

    monkeypatch.setattr(fake_ops, "credential_set", no_s3)
    client = await make_client()
    resp = await client.get(AWS, headers={"Authorization": "x"})
    assert resp.status == 502
    assert "S3" in (await resp.json())["error"]["message"]


async def test_a_rotated_credential_is_served_at_once_on_the_aws_endpoint(
    make_client: MakeClient, rotating_ops: RotatingOperations
) -> None:
    client = await make_client(ops=rotating_ops)

    async def key() -> str:
        resp = await client.get(AWS, headers={"Authorization": "anything"})
        assert resp.status == 200
        return str((await resp.json())["AccessKeyId"])

    assert await rotating_ops.keys_across_rotation(key) == ROTATED_KEYS


# botocore's refresh windows for container credentials (botocore/credentials.py:
# RefreshableCredentials._advisory_refresh_timeout / _mandatory_refresh_timeout).
BOTOCORE_ADVISORY_S = 15 * 60


async def test_the_aws_endpoint_asks_for_more_than_botocores_refresh_window(
    make_client: MakeClient, fake_ops: FakeOperations
) -> None:
    """The service renews below this (tests/unit/service/test_renewal.py), so an SDK is never
    handed a credential it would refresh again on its next call."""
    client = await make_client()
    resp = await client.get(AWS, headers={"Authorization": "x"})
    assert resp.status == 200
    (min_left,) = fake_ops.min_left
    assert min_left is not None
    assert min_left > BOTOCORE_ADVISORY_S


async def test_the_aws_answer_says_no_store(make_client: MakeClient) -> None:
    """Issue #35 finding 7: the container-credentials answer carried no Cache-Control."""
    client = await make_client()
    for _ in range(2):
        resp = await client.get(AWS, headers={"Authorization": "anything"})
        assert resp.status == 200
        assert resp.headers.getall("Cache-Control") == ["no-store"]
