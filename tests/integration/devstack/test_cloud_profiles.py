"""The emulator's ADLS and GCS warehouses over HTTP, in process: Lakekeeper's management shapes
in, Lakekeeper's vended keys out (the `sr=d` directory SAS shape included)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from urllib.parse import parse_qs

import pytest
from aiohttp.test_utils import TestClient, TestServer

from devstack.emulator.app import create_app
from devstack.emulator.config import EmulatorConfig
from devstack.emulator.sas import DEV_ACCOUNT, DEV_ACCOUNT_KEY

pytestmark = pytest.mark.integration

ADLS = {
    "storage-profile": {
        "type": "adls", "filesystem": "fs1", "account-name": DEV_ACCOUNT, "key-prefix": "lake",
        "sas-token-validity-seconds": 1800,
    },
    "storage-credential": {
        "type": "az", "credential-type": "shared-access-key", "key": DEV_ACCOUNT_KEY,
    },
}  # fmt: skip
GCS = {
    "storage-profile": {"type": "gcs", "bucket": "gb", "key-prefix": "lake"},
    "storage-credential": {
        "type": "gcs", "credential-type": "service-account-key",
        "key": {"private_key": "k", "project_id": "proj"},
    },
}  # fmt: skip
SUFFIX = f"{DEV_ACCOUNT}.dfs.core.windows.net"


@pytest.fixture
async def client() -> AsyncIterator[TestClient]:
    app = create_app(EmulatorConfig(purge_delay_s=None, adls_sas_scope="directory"))
    async with TestClient(TestServer(app)) as c:
        yield c


async def _table(client: TestClient, body: dict) -> tuple[str, dict]:
    resp = await client.post("/management/v1/warehouse", json={"warehouse-name": "w", **body})
    assert resp.status == 201, await resp.text()
    wid = (await resp.json())["warehouse-id"]
    assert (await client.post(f"/catalog/v1/{wid}/namespaces", json={"namespace": ["ns"]})).ok
    base = f"/lakekeeper/v1/{wid}/namespaces/ns/generic-tables"
    created = await client.post(base, json={"name": "t", "format": "parquet"})
    assert created.status == 200, await created.text()
    loaded = await (await client.get(f"{base}/t")).json()
    return loaded["table"]["base-location"], loaded


async def test_adls_warehouse_vends_lakekeepers_directory_sas_shape(client):
    location, loaded = await _table(client, ADLS)
    assert location.startswith(f"abfss://fs1@{SUFFIX}/lake/")
    [cred] = loaded["storage-credentials"]
    assert cred["prefix"] == location
    config = cred["config"]
    assert set(config) == {
        f"adls.sas-token.{SUFFIX}", f"adls.sas-token-expires-at-ms.{SUFFIX}", "expiration-time",
    }  # fmt: skip
    sas = parse_qs(config[f"adls.sas-token.{SUFFIX}"])
    assert sas["sr"] == ["d"]
    assert sas["sdd"] == ["2"]  # lake/<uuid>
    assert sas["sp"] == ["rawdl"]
    assert loaded["config"] == {f"adls.sas-token.{SUFFIX}": config[f"adls.sas-token.{SUFFIX}"]}


async def test_gcs_warehouse_vends_lakekeepers_keys(client):
    location, loaded = await _table(client, GCS)
    assert location.startswith("gs://gb/lake/")
    config = loaded["storage-credentials"][0]["config"]
    assert set(config) == {
        "gcs.oauth2.token", "gcs.oauth2.token-expires-at", "expiration-time", "gcs.project-id",
    }  # fmt: skip
    assert config["gcs.oauth2.token-expires-at"] == config["expiration-time"]


@pytest.mark.parametrize(
    ("profile", "status"),
    [
        ({"type": "hdfs"}, 400),
        ({"type": "adls", "filesystem": "fs"}, 422),  # no account-name
        ({"type": "gcs"}, 422),  # no bucket
        ({**ADLS["storage-profile"], "sas-token-validity-seconds": "1h"}, 422),
    ],
)
async def test_bad_profiles_are_refused(client, profile, status):
    resp = await client.post(
        "/management/v1/warehouse", json={"warehouse-name": "w", "storage-profile": profile}
    )
    assert resp.status == status
