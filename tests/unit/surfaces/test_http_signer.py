"""The node's sign route and the signing load, over HTTP with a fake service (no store)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import pytest

from gateway.metrics import Metrics
from gateway.models import AccessMode, CredentialSet, GenericTable, StorageCredential
from tests.unit.surfaces.conftest import AUTH, MakeClient
from tests.unit.surfaces.test_http_iceberg import READ_ONLY, TABLE, IcebergOps

SIGN = TABLE + "/sign"
SIGNING = {**AUTH, "X-Iceberg-Access-Delegation": "remote-signing"}
EP = "http://127.0.0.1:1"
OBJECT = f"{EP}/warehouse/demo_ns/orders/data/f.parquet"


@dataclass
class SigningOps(IcebergOps):
    """IcebergOps whose credential addresses its store path-style (as the stack's does)."""

    def credential_set(self, table: GenericTable) -> CredentialSet:
        base = super().credential_set(table)
        cred = base.credentials[0]
        new = StorageCredential(prefix=cred.prefix, expires_at_ms=cred.expires_at_ms,
                                config={**cred.config, "s3.path-style-access": "true"})
        return CredentialSet((new,), base.expires_at_ms, location=base.location)


def _ops() -> SigningOps:
    ops = SigningOps()
    ops.add_table(("demo_ns",), "orders")
    return ops


def _req(uri: str = OBJECT, method: str = "GET", **extra: Any) -> dict[str, Any]:
    return {"region": "us-east-1", "uri": uri, "method": method,
            "headers": {"User-Agent": ["pyiceberg"], "Range": ["bytes=0-7"]}, **extra}


def _signed(metrics: Metrics, mode: str) -> float:
    return metrics.registry.get_sample_value("lakegate_sign_requests_total", {"mode": mode}) or 0


async def test_signing_load_gives_no_key_and_names_the_nodes_signer(make_client: MakeClient):
    ops = _ops()
    client = await make_client(ops=ops, signing=True)
    resp = await client.get(TABLE, headers=SIGNING)
    assert resp.status == 200
    doc = await resp.json()
    config = doc["config"]
    host = f"http://{client.server.host}:{client.server.port}"
    assert config["signer.uri"] == config["s3.signer.uri"] == host + "/catalog/"
    assert config["signer.endpoint"] == config["s3.signer.endpoint"] == (
        "v1/demo/namespaces/demo_ns/tables/orders/sign")
    assert (config["s3.remote-signing-enabled"], config["s3.signer"]) == ("true", "S3V4RestSigner")
    assert "storage-credentials" not in doc
    assert not [k for k in config if "key" in k or "token" in k]
    assert ops.calls["get_credentials"] == 0  # the first signature fetches it
    creds = await client.get(TABLE + "/credentials", headers=SIGNING)
    assert await creds.json() == {"storage-credentials": []}


async def test_a_read_is_signed_on_the_node_with_the_read_credential(make_client: MakeClient,
                                                                    metrics: Metrics):
    ops = _ops()
    client = await make_client(ops=ops, signing=True)
    resp = await client.post(SIGN, json=_req(), headers=AUTH)
    assert resp.status == 200, await resp.text()
    assert resp.headers["Cache-Control"] == "private"
    doc = await resp.json()
    assert doc["uri"] == OBJECT
    assert doc["headers"]["Range"] == ["bytes=0-7"]
    assert doc["headers"]["authorization"][0].startswith(
        "AWS4-HMAC-SHA256 Credential=ASIAFAKEACCESSKEY0001/")
    assert "Cache-Control" not in doc["headers"]
    assert ops.accesses == [AccessMode.READ]
    assert _signed(metrics, "local") == 1
    put = await client.post(SIGN, json=_req(method="PUT"), headers=AUTH)
    assert put.status == 200
    assert put.headers["Cache-Control"] == "no-cache"
    assert ops.accesses[-1] is AccessMode.WRITE


@pytest.mark.parametrize(("method", "uri"), [
    ("PUT", OBJECT), ("DELETE", OBJECT), ("POST", OBJECT + "?uploads"),
    ("PUT", OBJECT + "?partNumber=1&uploadId=u"),
])
async def test_a_read_caller_gets_no_write_signed(make_client: MakeClient, method, uri):
    ops = _ops()
    client = await make_client(ops=ops, signing=True, policy=READ_ONLY)
    resp = await client.post(SIGN, json=_req(uri, method), headers=AUTH)
    assert resp.status == 403
    assert ops.calls["get_credentials"] == 0  # refused before any credential is touched
    assert (await client.post(SIGN, json=_req(), headers=AUTH)).status == 200


async def test_unknown_table_and_out_of_table_uris_are_refused(make_client: MakeClient,
                                                              metrics: Metrics):
    client = await make_client(ops=_ops(), signing=True)
    missing = await client.post("/catalog/v1/demo/namespaces/demo_ns/tables/nope/sign",
                                json=_req(), headers=AUTH)
    assert missing.status == 404
    for uri in (f"{EP}/warehouse/demo_ns/orders_other/f", f"{EP}/other/demo_ns/orders/f",
                "http://127.0.0.1:2/warehouse/demo_ns/orders/f"):
        resp = await client.post(SIGN, json=_req(uri), headers=AUTH)
        assert resp.status == 403, uri
    assert _signed(metrics, "local") == 0


HOSTILE: list[Any] = [
    b"not json", b"[]", b"{}", b'{"region": "us-east-1"}',
    json.dumps(_req() | {"headers": {"X-A": ["1\r\nX-B: 2"]}}).encode(),
    json.dumps(_req() | {"headers": {"X-A": ["\u00e9"]}}).encode(),
    json.dumps(_req(uri=f"{EP}/warehouse/demo_ns/orders/%2e%2e/x")).encode(),
    json.dumps(_req(uri=f"{EP}/warehouse/demo_ns/orders/a%2Fb")).encode(),
    json.dumps(_req() | {"region": "eu-west-1"}).encode(),
    json.dumps(_req() | {"provider": "adls"}).encode(),
    json.dumps(_req(method="TRACE")).encode(),
    json.dumps(_req(f"{EP}/warehouse?delete", "POST")).encode(),
    json.dumps(_req(f"{EP}/warehouse?delete", "POST", body="<x")).encode(),
    json.dumps(_req() | {"headers": {"x-amz-copy-source": ["warehouse/other/f"]}}).encode(),
]


@pytest.mark.parametrize("body", HOSTILE, ids=range(len(HOSTILE)))
async def test_hostile_bodies_get_a_clear_4xx_and_nothing_signed(make_client: MakeClient,
                                                                metrics: Metrics, body):
    client = await make_client(ops=_ops(), signing=True)
    resp = await client.post(SIGN, data=body,
                             headers={**AUTH, "Content-Type": "application/json"})
    assert 400 <= resp.status < 500, (resp.status, await resp.text())
    assert "error" in await resp.json()
    assert _signed(metrics, "local") == 0


async def test_an_oversized_body_is_refused_before_parsing(make_client: MakeClient):
    client = await make_client(ops=_ops(), signing=True, max_body_bytes=4096)
    body = json.dumps(_req() | {"body": "x" * 8192}).encode()
    resp = await client.post(SIGN, data=body, headers={**AUTH, "Content-Type": "application/json"})
    assert resp.status == 413


async def test_a_credential_about_to_expire_is_never_signed_with(make_client: MakeClient):
    ops = _ops()
    ops.lifetime_s = 60.0  # under MIN_SIGN_LEFT_S
    client = await make_client(ops=ops, signing=True)
    resp = await client.post(SIGN, json=_req(), headers=AUTH)
    assert 400 <= resp.status < 600
    assert resp.status != 200
    assert "authorization" not in await resp.text()


async def test_a_generic_table_asked_for_remote_signing_gets_no_key(make_client: MakeClient):
    ops = _ops()
    client = await make_client(ops=ops, signing=True)
    path = "/lakekeeper/v1/demo/namespaces/demo_ns/generic-tables/orders"
    resp = await client.get(path + "/credentials", headers=SIGNING)
    assert await resp.json() == {"storage-credentials": []}
    loaded = await client.get(path, headers=SIGNING)
    assert "storage-credentials" not in await loaded.json()
