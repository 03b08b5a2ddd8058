"""S3 remote signing through the node's gateway, on the real stack (SeaweedFS enforces SigV4).

Two warehouses: the STS one (`demo`: the gateway signs locally with the table's cached STS
credential, the catalog sees no sign request) and the signing-only one (`demo_signing`: STS
off, the gateway forwards each checked request to the catalog's signer). A boto3 client with
no credentials at all signs through the gateway (lakegate_client.signing); signatures are
counted on the node (`lakegate_sign_requests_total`) and at the catalog, so an unsigned
fallback could not pass.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import botocore.exceptions
import httpx
import pyarrow as pa
import pytest
from pyiceberg.catalog.rest import RestCatalog

from devstack.metrics_scrape import delta, scrape
from devstack.stack_info import StackInfo
from lakegate_client.signing import RemoteSigner, SigningError, signing_s3_client
from tests.integration.gateway.conftest import MARK

pytestmark = pytest.mark.integration

ROWS = pa.table({"id": pa.array([1, 2, 3], pa.int64()), "name": pa.array(["a", "b", "c"])})
AUTH = {"Authorization": "Bearer x", **MARK}
SIGNING = {"X-Iceberg-Access-Delegation": "remote-signing"}
KEY_MATERIAL = ("s3.access-key-id", "s3.secret-access-key", "s3.session-token")


def _catalog(info: StackInfo, warehouse: str) -> RestCatalog:
    return RestCatalog("gw", uri=info.gateway_url + "/catalog", warehouse=warehouse,
                       token="x", **{"header.X-Lakegate-Request": "1"})  # noqa: S106


def _table(info: StackInfo, warehouse: str) -> Iterator[tuple[str, str]]:
    rest = _catalog(info, warehouse)
    ident = (info.namespace, f"sig_{uuid.uuid4().hex[:8]}")
    rest.create_table(ident, schema=ROWS.schema)
    yield ident
    rest.drop_table(ident)


@pytest.fixture
def sts_table(info: StackInfo) -> Iterator[tuple[str, str]]:
    yield from _table(info, info.warehouse.name)


@pytest.fixture
def signing_table(info: StackInfo) -> Iterator[tuple[str, str]]:
    yield from _table(info, info.warehouse_for("s3-signing").name)


def _load(gw: httpx.Client, warehouse: str, ident: tuple[str, str]) -> dict[str, Any]:
    resp = gw.get(f"/catalog/v1/{warehouse}/namespaces/{ident[0]}/tables/{ident[1]}",
                  headers={**AUTH, **SIGNING})
    assert resp.status_code == 200, resp.text
    doc: dict[str, Any] = resp.json()
    return doc


def _s3(config: dict[str, str]) -> tuple[Any, RemoteSigner]:
    signer = RemoteSigner.from_config(config, headers=AUTH)
    client = signing_s3_client(signer, region=config["s3.region"],
                               endpoint_url=config["s3.endpoint"],
                               path_style=config.get("s3.path-style-access") == "true")
    return client, signer


def _bucket_key(location: str) -> tuple[str, str]:
    bucket, _, key = location.removeprefix("s3://").partition("/")
    return bucket, key


def _round_trip(client: Any, location: str) -> None:
    """PUT, GET, HEAD, list and DELETE one object inside the table, through the signer."""
    bucket, prefix = _bucket_key(location)
    key = f"{prefix}/data/probe-{uuid.uuid4().hex[:6]}.bin"
    client.put_object(Bucket=bucket, Key=key, Body=b"signed bytes")
    assert client.get_object(Bucket=bucket, Key=key)["Body"].read() == b"signed bytes"
    assert client.get_object(Bucket=bucket, Key=key, Range="bytes=0-5")["Body"].read() == b"signed"
    listed = client.list_objects_v2(Bucket=bucket, Prefix=f"{prefix}/data/")
    assert key in [o["Key"] for o in listed.get("Contents", [])]
    client.delete_objects(Bucket=bucket, Delete={"Objects": [{"Key": key}]})
    with pytest.raises(botocore.exceptions.ClientError):
        client.head_object(Bucket=bucket, Key=key)


def test_sts_warehouse_signs_on_the_node_and_the_catalog_sees_no_sign_request(
    info: StackInfo, gw: httpx.Client, emulator: Any, sts_table: tuple[str, str],
) -> None:
    doc = _load(gw, info.warehouse.name, sts_table)
    config = doc["config"]
    assert "storage-credentials" not in doc
    assert not [k for k in KEY_MATERIAL if k in config]
    assert config["s3.remote-signing-enabled"] == "true"
    assert config["signer.uri"] == config["s3.signer.uri"] == info.gateway_url + "/catalog/"
    assert config["signer.endpoint"] == config["s3.signer.endpoint"]
    assert config["signer.endpoint"].endswith(f"/tables/{sts_table[1]}/sign")
    emulator.reset()
    before = scrape(info.gateway_url)
    client, signer = _s3(config)
    _round_trip(client, doc["metadata"]["location"])
    after = scrape(info.gateway_url)
    assert delta(before, after, "lakegate_sign_requests_total", mode="local") == signer.signed
    assert signer.signed >= 6
    assert not {k: v for k, v in emulator.stats().items() if k.startswith("sign")}
    # outside the table: refused on the node, nothing sent to the store
    bucket, prefix = _bucket_key(doc["metadata"]["location"])
    with pytest.raises(SigningError, match="403"):
        client.get_object(Bucket=bucket, Key=prefix + "_other/x")
    # the credential refresh endpoint gives a signing caller no key either
    creds = gw.get(f"/catalog/v1/{info.warehouse.name}/namespaces/{sts_table[0]}/tables/"
                   f"{sts_table[1]}/credentials", headers={**AUTH, **SIGNING}).json()
    assert creds == {"storage-credentials": []}


def test_signing_only_warehouse_is_served_by_forwarding_to_the_catalogs_signer(
    info: StackInfo, gw: httpx.Client, emulator: Any, signing_table: tuple[str, str],
) -> None:
    warehouse = info.warehouse_for("s3-signing").name
    doc = _load(gw, warehouse, signing_table)
    config = doc["config"]
    assert not [k for k in KEY_MATERIAL if k in config]
    assert config["signer.uri"] == info.gateway_url + "/catalog/"
    emulator.reset()
    before = scrape(info.gateway_url)
    client, signer = _s3(config)
    _round_trip(client, doc["metadata"]["location"])
    after = scrape(info.gateway_url)
    assert delta(before, after, "lakegate_sign_requests_total", mode="forwarded") == signer.signed
    assert emulator.stats()["signed"] == signer.signed  # each one signed by the catalog
    bucket, prefix = _bucket_key(doc["metadata"]["location"])
    with pytest.raises(SigningError, match="403"):
        client.put_object(Bucket=bucket, Key=prefix + "_other/x", Body=b"x")
    assert emulator.stats()["signed"] == signer.signed  # refused before the catalog
