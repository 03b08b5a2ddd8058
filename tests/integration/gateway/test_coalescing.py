"""Single-flight through the whole daemon: concurrent callers cost one upstream call per table.

Counters are exact: the emulator counts upstream calls per operation, and the gateway's own
lakegate_requests_total must equal what the test sent, split into miss / coalesced / hit.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import aiohttp
import httpx
import pytest

from tests.gateway_process import stack_env, start_gateway
from tests.integration.gateway.conftest import MARK, requests_delta, scrape

pytestmark = pytest.mark.integration

CONCURRENCY = 1000


async def _burst(base: str, paths: list[str], uds: Path | None = None) -> list[dict]:
    connector = (aiohttp.UnixConnector(path=str(uds), limit=0) if uds
                 else aiohttp.TCPConnector(limit=0))
    async with aiohttp.ClientSession(connector=connector, headers=MARK) as session:

        async def one(path: str) -> dict:
            async with session.get(base + path) as resp:
                assert resp.status == 200, await resp.text()
                return await resp.json()

        async with asyncio.timeout(120):
            return await asyncio.gather(*(one(p) for p in paths))


def test_1000_concurrent_requests_for_a_cold_table_make_one_upstream_call(
    info: dict[str, Any], gw: httpx.Client, new_table, emulator
) -> None:
    table = new_table(prefix="cold")
    path = (f"/v1/warehouses/demo/namespaces/{table['namespace']}/tables/"
            f"{table['table']['name']}/credentials")
    emulator.reset()
    before = scrape(gw)
    docs = asyncio.run(_burst(info["gateway"]["http_url"], [path] * CONCURRENCY))
    after = scrape(gw)

    assert emulator.stats()["load_generic_table_credentials"] == 1
    outcomes = [d["outcome"] for d in docs]
    assert outcomes.count("miss") == 1
    assert outcomes.count("coalesced") + outcomes.count("hit") == CONCURRENCY - 1
    assert len({d["credentials"][0]["config"]["s3.access-key-id"] for d in docs}) == 1
    # The gateway's request counters equal the truth exactly.
    for result in ("miss", "coalesced", "hit"):
        assert requests_delta(before, after, surface="http", kind="credential",
                              result=result) == outcomes.count(result)
    assert requests_delta(before, after, surface="http", kind="credential") == CONCURRENCY


def test_200_callers_over_50_tables_make_50_upstream_calls_and_one_login(
    info: dict[str, Any], gw: httpx.Client, new_table, emulator, idp_stats, tmp_path: Path
) -> None:
    tables = [new_table(prefix="fan")["table"]["name"] for _ in range(50)]
    ns = info["namespace"]
    paths = [f"/v1/warehouses/demo/namespaces/{ns}/tables/{tables[i % 50]}/credentials"
             for i in range(200)]
    idp_stats.reset()
    proc = start_gateway(tmp_path, stack_env(info), name="fan")  # a fresh session
    try:
        emulator.reset()
        docs = asyncio.run(_burst("http://gateway", paths, proc.http_uds))
        assert emulator.stats()["load_generic_table_credentials"] == 50
        assert idp_stats.token_requests() == 1
        assert [d["outcome"] for d in docs].count("miss") == 50
    finally:
        assert proc.stop() == 0
