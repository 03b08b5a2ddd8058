"""pyiceberg's RestCatalog, unchanged, with the gateway as its catalog (real stack).

Metadata is forwarded (never stale), credentials come from the gateway's cache: the emulator's
counters show how many upstream credential calls and vended loads the gateway made.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import Iterator
from typing import Any

import aiohttp
import httpx
import pyarrow as pa
import pytest
from pyiceberg.catalog.rest import RestCatalog
from pyiceberg.exceptions import NoSuchTableError
from pyiceberg.table import Table

from devstack.stack_info import StackInfo
from tests.integration.gateway.conftest import MARK

pytestmark = pytest.mark.integration

ROWS = pa.table({"id": pa.array([1, 2, 3], pa.int64()), "name": pa.array(["a", "b", "c"])})
CONCURRENT_LOADS = 32


def _catalog(info: StackInfo) -> RestCatalog:
    return RestCatalog(
        "gateway",
        uri=info.gateway_url + "/catalog",
        warehouse=info.warehouse.name,
        token="x",  # noqa: S106 - the stack's gateway accepts any bearer from a local caller
        **{"header.X-Iceberg-Access-Delegation": "vended-credentials",
           "header.X-Lakegate-Request": "1"},
    )


def _ident(info: StackInfo, prefix: str) -> tuple[str, str]:
    return (info.namespace, f"{prefix}_{uuid.uuid4().hex[:8]}")


@pytest.fixture
def rest(info: StackInfo) -> RestCatalog:
    return _catalog(info)


@pytest.fixture
def created(info: StackInfo, rest: RestCatalog) -> Iterator[tuple[tuple[str, str], Table]]:
    """A fresh empty Iceberg table (the schema of ROWS), dropped after the test."""
    ident = _ident(info, "ice")
    yield ident, rest.create_table(ident, schema=ROWS.schema)
    with contextlib.suppress(NoSuchTableError):
        rest.drop_table(ident)


def test_config_points_pyiceberg_at_the_gateway(info: StackInfo, gw: httpx.Client) -> None:
    resp = gw.get("/catalog/v1/config", params={"warehouse": info.warehouse.name},
                  headers={"Authorization": "Bearer x"})
    doc = resp.json()
    assert doc["overrides"]["uri"] == info.gateway_url + "/catalog"
    assert "POST /v1/{prefix}/namespaces/{namespace}/tables/{table}" in doc["endpoints"]


def test_create_append_scan_append_scan_drop_with_vended_credentials(
    info: StackInfo, emulator: Any, rest: RestCatalog
) -> None:
    ident = _ident(info, "ice")
    table = rest.create_table(ident, schema=ROWS.schema)
    table.append(ROWS)
    assert rest.load_table(ident).scan().to_arrow().num_rows == 3
    table.append(ROWS)
    # a fresh load right after the commit sees it: metadata is never cached by the gateway
    scanned = rest.load_table(ident).scan().to_arrow()
    assert scanned.num_rows == 6
    assert sorted(scanned["id"].to_pylist()) == [1, 1, 2, 2, 3, 3]
    loaded = rest.load_table(ident)
    assert loaded.io.properties["s3.session-token"]
    refresh = loaded.io.properties.get("client.refresh-credentials-endpoint")
    assert refresh is not None
    assert refresh.startswith(info.gateway_url + "/catalog/v1/")
    stats = emulator.stats()
    assert stats["create_table"] == 1
    assert stats["commit_table"] == 2
    # loads went upstream without vending; credentials came from the cache (one fetch)
    assert stats["load_table"] >= 3
    assert stats["load_table_vended"] == 0
    assert stats["load_table_credentials"] == 1
    rest.drop_table(ident)
    with pytest.raises(NoSuchTableError):
        rest.load_table(ident)


def test_overwrite_and_rename_through_the_gateway(
    info: StackInfo, rest: RestCatalog, created: tuple[tuple[str, str], Table]
) -> None:
    ident, table = created
    table.append(ROWS)
    table.overwrite(ROWS.slice(0, 1))
    assert rest.load_table(ident).scan().to_arrow()["id"].to_pylist() == [1]
    renamed = (ident[0], ident[1] + "_r")
    rest.rename_table(ident, renamed)
    assert rest.load_table(renamed).scan().to_arrow().num_rows == 1
    assert rest.list_tables(info.namespace).count(renamed) == 1
    rest.drop_table(renamed)


def test_32_concurrent_vended_loads_of_a_warm_table_cost_at_most_one_credential_call(
    info: StackInfo, emulator: Any, rest: RestCatalog, created: tuple[tuple[str, str], Table]
) -> None:
    ident, table = created
    table.append(ROWS)
    rest.load_table(ident)  # warm
    emulator.reset()
    wh = rest.properties["prefix"]
    path = f"/catalog/v1/{wh}/namespaces/{ident[0]}/tables/{ident[1]}"

    async def burst() -> list[dict[str, Any]]:
        headers = {**MARK, "Authorization": "Bearer x",
                   "X-Iceberg-Access-Delegation": "vended-credentials"}
        async with aiohttp.ClientSession(headers=headers) as session:
            async def one() -> dict[str, Any]:
                async with session.get(info.gateway_url + path) as resp:
                    assert resp.status == 200, await resp.text()
                    doc: dict[str, Any] = await resp.json()
                    return doc

            async with asyncio.timeout(60):
                return await asyncio.gather(*(one() for _ in range(CONCURRENT_LOADS)))

    docs = asyncio.run(burst())
    stats = emulator.stats()
    assert stats["load_table"] == CONCURRENT_LOADS  # metadata: every load forwarded
    assert stats["load_table_vended"] == 0
    assert stats["load_table_credentials"] <= 1
    keys = {d["storage-credentials"][0]["config"]["s3.access-key-id"] for d in docs}
    assert len(keys) == 1
    assert all(d["config"]["s3.access-key-id"] in keys for d in docs)


def test_credentials_endpoint_is_served_from_the_cache(
    info: StackInfo, emulator: Any, rest: RestCatalog, created: tuple[tuple[str, str], Table]
) -> None:
    ident, table = created
    rest.load_table(ident)
    emulator.reset()
    for _ in range(5):
        creds = rest.load_credentials(ident, table.location())
        assert creds["s3.session-token"]
        assert creds["client.refresh-credentials-endpoint"].startswith(
            info.gateway_url)
    assert emulator.stats()["load_table_credentials"] == 0


def test_a_vended_load_revalidates_to_304_until_the_table_changes(
    info: StackInfo, emulator: Any, rest: RestCatalog, gw: httpx.Client,
    created: tuple[tuple[str, str], Table],
) -> None:
    """Iceberg Java's table cache sends `If-None-Match`: the gateway's tag on the merged body
    gets a 304 (one metadata call, no credential call) until a commit changes the metadata."""
    ident, table = created
    wh = rest.properties["prefix"]
    path = f"/catalog/v1/{wh}/namespaces/{ident[0]}/tables/{ident[1]}"
    vended = {"Authorization": "Bearer x", "X-Iceberg-Access-Delegation": "vended-credentials"}
    first = gw.get(path, headers=vended)
    assert first.status_code == 200, first.text
    tag = first.headers["ETag"]
    assert tag.startswith('W/"lg1.')
    assert first.json()["config"]["s3.session-token"] not in tag
    emulator.reset()
    again = gw.get(path, headers={**vended, "If-None-Match": tag})
    assert again.status_code == 304
    assert again.headers["ETag"] == tag
    assert again.content == b""
    stats = emulator.stats()
    assert stats["load_table"] == 1
    assert stats["load_table_credentials"] == 0
    table.append(ROWS)  # new metadata: the catalog's tag moves, so the gateway's does
    changed = gw.get(path, headers={**vended, "If-None-Match": tag})
    assert changed.status_code == 200
    assert changed.headers["ETag"] != tag
    assert changed.json()["metadata"]["current-snapshot-id"] is not None
    # a client-managed tag (or garbage) is not the gateway's: a full vended load
    other = gw.get(path, headers={**vended, "If-None-Match": 'W/"lk2.0000"'})
    assert other.status_code == 200
    assert other.json()["storage-credentials"]


def test_a_table_under_a_missing_namespace_is_no_such_table(
    rest: RestCatalog, gw: httpx.Client, created: tuple[tuple[str, str], Table],
) -> None:
    """Iceberg Java resolves `ns.t.snapshots` by first loading table `snapshots` in namespace
    `ns.t`: only NoSuchTableException (as Lakekeeper answers) makes it try table `ns.t`."""
    ident, _ = created
    wh = rest.properties["prefix"]
    path = f"/catalog/v1/{wh}/namespaces/{ident[0]}%1F{ident[1]}/tables/snapshots"
    resp = gw.get(path, headers={"Authorization": "Bearer x",
                                 "X-Iceberg-Access-Delegation": "vended-credentials"})
    assert resp.status_code == 404
    assert resp.json()["error"]["type"] == "NoSuchTableException"
