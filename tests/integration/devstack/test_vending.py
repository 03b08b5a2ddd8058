"""Vended credentials are real, scoped and cached like Lakekeeper's (SeaweedFS enforces them)."""

from __future__ import annotations

import time
import uuid

import pytest
from botocore.exceptions import ClientError

from tests.integration.s3_clients import vended_s3

pytestmark = pytest.mark.integration


def _vend(catalog, name: str, role: str | None = None) -> dict[str, str]:
    headers = {"x-assume-role": role} if role else {}
    resp = catalog.http.get(f"{catalog.tables_path()}/{name}/credentials", headers=headers)
    assert resp.status_code == 200, resp.text
    return resp.json()["storage-credentials"][0]["config"]


def _table(catalog) -> tuple[str, str, str]:
    name = f"scope_{uuid.uuid4().hex[:8]}"
    body = catalog.create(name).json()
    location = body["table"]["base-location"]
    bucket, _, key = location.removeprefix("s3://").partition("/")
    return name, bucket, key


def _load(catalog, name: str, *delegation: str) -> dict:
    """The table's load answer; one `X-Iceberg-Access-Delegation` header line per value."""
    headers = [("X-Iceberg-Access-Delegation", v) for v in delegation]
    return catalog.http.get(f"{catalog.tables_path()}/{name}", headers=headers).json()


def test_write_credential_writes_inside_but_not_outside_its_prefix(catalog):
    name, bucket, key = _table(catalog)
    _, _, other_key = _table(catalog)
    s3 = vended_s3(_vend(catalog, name))
    s3.put_object(Bucket=bucket, Key=f"{key}/data/part-0", Body=b"ok")
    assert s3.get_object(Bucket=bucket, Key=f"{key}/data/part-0")["Body"].read() == b"ok"
    with pytest.raises(ClientError) as info:
        s3.put_object(Bucket=bucket, Key=f"{other_key}/data/part-0", Body=b"no")
    assert info.value.response["Error"]["Code"] == "AccessDenied"
    with pytest.raises(ClientError) as info:
        s3.list_objects_v2(Bucket=bucket, Prefix=f"{other_key}/")
    assert info.value.response["Error"]["Code"] == "AccessDenied"


def test_read_role_credential_reads_but_cannot_write(catalog):
    name, bucket, key = _table(catalog)
    vended_s3(_vend(catalog, name)).put_object(Bucket=bucket, Key=f"{key}/f", Body=b"x")
    reader = vended_s3(_vend(catalog, name, catalog.stack.info.catalog.roles["read"]))
    assert reader.get_object(Bucket=bucket, Key=f"{key}/f")["Body"].read() == b"x"
    assert reader.list_objects_v2(Bucket=bucket, Prefix=f"{key}/")["KeyCount"] == 1
    for call in (
        lambda: reader.put_object(Bucket=bucket, Key=f"{key}/g", Body=b"y"),
        lambda: reader.delete_object(Bucket=bucket, Key=f"{key}/f"),
    ):
        with pytest.raises(ClientError) as info:
            call()
        assert info.value.response["Error"]["Code"] == "AccessDenied"


def test_unknown_role_is_400_invalid_role(catalog):
    name, _, _ = _table(catalog)
    resp = catalog.http.get(
        f"{catalog.tables_path()}/{name}/credentials", headers={"x-assume-role": str(uuid.uuid4())}
    )
    assert resp.status_code == 400
    assert resp.json()["error"]["type"] == "InvalidRoleIdError"


def test_server_cache_reuses_one_sts_credential_per_permission_level(catalog, hooks):
    name, _, _ = _table(catalog)
    read_role = catalog.stack.info.catalog.roles["read"]
    first = [_vend(catalog, name) for _ in range(5)]
    reads = [_vend(catalog, name, read_role) for _ in range(3)]
    stats = hooks.stats()
    assert stats["load_generic_table_credentials"] == 8
    assert stats["sts_assume_role"] == 2
    assert len({c["s3.access-key-id"] for c in first}) == 1
    assert reads[0]["s3.access-key-id"] != first[0]["s3.access-key-id"]
    remaining_s = int(first[0]["expiration-time"]) / 1000 - time.time()
    assert 1800 < remaining_s <= 3600


def test_shorter_advertised_lifetime_fault(catalog, hooks):
    name, bucket, key = _table(catalog)
    hooks.set_faults(credential_lifetime_s=60)
    config = _vend(catalog, name)
    remaining_s = int(config["s3.session-token-expires-at-ms"]) / 1000 - time.time()
    assert 50 < remaining_s <= 60
    assert config["expiration-time"] == config["s3.session-token-expires-at-ms"]
    vended_s3(config).put_object(Bucket=bucket, Key=f"{key}/x", Body=b"still a real credential")
    hooks.clear_faults()
    assert int(_vend(catalog, name)["expiration-time"]) / 1000 - time.time() > 1800


def test_credential_cannot_list_a_sibling_whose_name_extends_its_own(catalog):
    # Lakekeeper grants s3:ListBucket only for `<key>/*`; with the bare `<key>` as well a
    # credential for `.../t1` could list `.../t10/` (SeaweedFS enforces the session policy).
    _, bucket, key = _table(catalog)
    base = f"s3://{bucket}/{key.rpartition('/')[0]}".rstrip("/") + f"/sib_{uuid.uuid4().hex[:8]}"
    names = {}
    for leaf in ("t1", "t10"):
        name = f"sib_{leaf}_{uuid.uuid4().hex[:8]}"
        resp = catalog.create(name, **{"base-location": f"{base}/{leaf}"})
        assert resp.status_code == 200, resp.text
        names[leaf] = (name, resp.json()["table"]["base-location"].removeprefix(f"s3://{bucket}/"))
    t10_name, t10_key = names["t10"]
    vended_s3(_vend(catalog, t10_name)).put_object(Bucket=bucket, Key=f"{t10_key}/f", Body=b"x")
    t1_name, t1_key = names["t1"]
    t1 = vended_s3(_vend(catalog, t1_name))
    assert t1.list_objects_v2(Bucket=bucket, Prefix=f"{t1_key}/").get("KeyCount", 0) == 0
    for prefix in (f"{t10_key}/", t1_key):
        with pytest.raises(ClientError) as info:
            t1.list_objects_v2(Bucket=bucket, Prefix=prefix)
        assert info.value.response["Error"]["Code"] == "AccessDenied"


@pytest.mark.parametrize(
    "header",
    [
        ["Vended-Credentials"],
        ["bogus"],
        ["client-managed", "vended-credentials"],
        ["remote-signing"],
    ],
)
def test_unknown_or_merged_delegation_values_vend(catalog, header):
    name, _, _ = _table(catalog)
    body = _load(catalog, name, *header)
    assert "s3.session-token" in body["storage-credentials"][0]["config"]


def test_client_managed_load_has_region_keys_and_no_credentials(catalog):
    name, _, _ = _table(catalog)
    body = _load(catalog, name, "bogus , client-managed")
    assert "storage-credentials" not in body
    for k in ("s3.region", "region", "client.region", "s3.endpoint", "s3.path-style-access"):
        assert body["config"][k]
    assert not [k for k in body["config"] if "key" in k or "token" in k]


def test_load_config_carries_keys_but_no_expiry(catalog):
    name, _, _ = _table(catalog)
    body = _load(catalog, name, "vended-credentials")
    assert body["config"]["region"] == "us-east-1"
    assert "s3.session-token" in body["config"]
    assert "expiration-time" not in body["config"]
    assert body["storage-credentials"][0]["prefix"] == body["table"]["base-location"]
    managed = _load(catalog, name, "client-managed")
    assert "storage-credentials" not in managed
    assert "s3.access-key-id" not in managed["config"]


def test_write_credential_batch_deletes_inside_its_prefix_only(catalog):
    """The Lance ledger's cleanup deletes in one DeleteObjects (object_store.S3Store): SeaweedFS
    takes it from a vended credential, and keys outside the prefix stay."""
    from lakegate_client.engine.stores.s3 import BatchDeletes, S3Store

    name, bucket, key = _table(catalog)
    other, other_bucket, other_key = _table(catalog)
    s3, outsider = vended_s3(_vend(catalog, name)), vended_s3(_vend(catalog, other))
    keys = [f"{key}/_lakegate_attempts/w/{i}.json" for i in range(5)]
    for k in keys:
        s3.put_object(Bucket=bucket, Key=k, Body=b"{}")
    outsider.put_object(Bucket=other_bucket, Key=f"{other_key}/kept", Body=b"x")
    batches = BatchDeletes()
    S3Store(s3, bucket).delete_many(keys, batches)
    assert batches.allowed(s3.meta.endpoint_url)  # not refused: no fallback happened
    assert s3.list_objects_v2(Bucket=bucket, Prefix=f"{key}/").get("KeyCount", 0) == 0
    answer = s3.delete_objects(Bucket=bucket, Delete={
        "Objects": [{"Key": f"{other_key}/kept"}], "Quiet": True})
    assert [e["Key"] for e in answer.get("Errors", [])] == [f"{other_key}/kept"]
    assert outsider.get_object(Bucket=other_bucket, Key=f"{other_key}/kept")["Body"].read() == b"x"
