"""The emulator application in process (no IdP, no STS): no-auth mode and path decoding."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from aiohttp.test_utils import TestClient, TestServer

from devstack.emulator.app import create_app
from devstack.emulator.config import EmulatorConfig

pytestmark = pytest.mark.integration


@pytest.fixture
async def client() -> AsyncIterator[TestClient]:
    app = create_app(EmulatorConfig(purge_delay_s=None, max_body_bytes=1024))
    async with TestClient(TestServer(app)) as c:
        yield c


async def _warehouse(client: TestClient) -> str:
    profile = {
        "type": "s3",
        "bucket": "bkt",
        "region": "us-east-1",
        "sts-enabled": False,
        "key-prefix": "p",
    }
    resp = await client.post(
        "/management/v1/warehouse", json={"warehouse-name": "w", "storage-profile": profile}
    )
    assert resp.status == 201
    return str((await resp.json())["warehouse-id"])


async def test_no_auth_mode_ignores_any_authorization_header(client):
    for headers in ({}, {"Authorization": "Bearer garbage"}):
        resp = await client.get("/management/v1/whoami", headers=headers)
        assert resp.status == 200
        assert (await resp.json())["id"] == "anonymous"


async def test_special_characters_in_names_round_trip_through_percent_encoding(client):
    wid = await _warehouse(client)
    for ns in (["a b"], ["a b", "c"]):
        assert (
            await client.post(f"/catalog/v1/{wid}/namespaces", json={"namespace": ns})
        ).status == 200
    base = f"/lakekeeper/v1/{wid}/namespaces/a+b%1Fc/generic-tables"  # '+' means space
    created = await client.post(base, json={"name": "x/y z%", "format": "lance"})
    assert created.status == 200
    loaded = await client.get(
        f"/lakekeeper/v1/{wid}/namespaces/a%20b%1FC/generic-tables/X%2FY%20Z%25"
    )
    body = await loaded.json()
    assert body["table"]["name"] == "x/y z%"
    assert "storage-credentials" not in body  # STS disabled: nothing vended
    listed = await (await client.get(base)).json()
    assert listed["identifiers"][0]["namespace"] == ["a b", "c"]


async def test_sts_disabled_credentials_endpoint_returns_an_empty_list(client):
    wid = await _warehouse(client)
    await client.post(f"/catalog/v1/{wid}/namespaces", json={"namespace": ["n"]})
    await client.post(
        f"/lakekeeper/v1/{wid}/namespaces/n/generic-tables", json={"name": "t", "format": "lance"}
    )
    resp = await client.get(f"/lakekeeper/v1/{wid}/namespaces/n/generic-tables/t/credentials")
    assert await resp.json() == {"storage-credentials": []}


async def test_body_limit_applies_before_parsing(client):
    wid = await _warehouse(client)
    resp = await client.post(
        f"/catalog/v1/{wid}/namespaces",
        data=b"x" * 2048,
        headers={"Content-Type": "application/json"},
    )
    assert resp.status == 413
    assert "length limit exceeded" in await resp.text()


async def test_bootstrap_twice_is_400_already_bootstrapped(client):
    body = {"accept-terms-of-use": True}
    assert (await client.post("/management/v1/bootstrap", json=body)).status == 204
    again = await client.post("/management/v1/bootstrap", json=body)
    assert again.status == 400
    assert (await again.json())["error"]["type"] == "CatalogAlreadyBootstrapped"


async def test_unknown_route_is_404_not_5xx(client):
    assert (await client.get("/lakekeeper/v1/x/nothing/here")).status == 404
    assert (await client.put("/management/v1/bootstrap")).status == 405
