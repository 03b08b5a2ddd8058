"""Single-flight through the whole daemon: concurrent callers cost one upstream call per table.

Counters are exact: the emulator counts upstream calls per operation, and the gateway's own
lakegate_requests_total must equal what the test sent, split into miss / coalesced / hit.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import aiohttp
import httpx
import pytest

from devstack.metrics_scrape import delta, scrape
from devstack.stack_info import StackInfo
from tests.gateway_process import stack_env, start_gateway
from tests.integration.gateway.conftest import MARK

REQUESTS = "lakegate_requests_total"

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
    info: StackInfo, gw: httpx.Client, new_table, emulator
) -> None:
    table = new_table(prefix="cold")
    path = (f"/v1/warehouses/demo/namespaces/{table['namespace']}/tables/"
            f"{table['table']['name']}/credentials")
    emulator.reset()
    before = scrape(info.gateway_url)
    docs = asyncio.run(_burst(info.gateway_url, [path] * CONCURRENCY))
    after = scrape(info.gateway_url)

    assert emulator.stats()["load_generic_table_credentials"] == 1
    outcomes = [d["outcome"] for d in docs]
    assert outcomes.count("miss") == 1
    assert outcomes.count("coalesced") + outcomes.count("hit") == CONCURRENCY - 1
    assert len({d["credentials"][0]["config"]["s3.access-key-id"] for d in docs}) == 1
    # The gateway's request counters equal the truth exactly.
    for result in ("miss", "coalesced", "hit"):
        assert delta(before, after, REQUESTS, surface="http", kind="credential",
                     result=result) == outcomes.count(result)
    assert delta(before, after, REQUESTS, surface="http", kind="credential") == CONCURRENCY


def test_200_callers_over_50_tables_make_50_upstream_calls_and_one_login(
    info: StackInfo, gw: httpx.Client, new_table, emulator, idp_stats, tmp_path: Path
) -> None:
    tables = [new_table(prefix="fan")["table"]["name"] for _ in range(50)]
    ns = info.namespace
    paths = [f"/v1/warehouses/demo/namespaces/{ns}/tables/{tables[i % 50]}/credentials"
             for i in range(200)]
    idp_stats.reset()
    proc = start_gateway(tmp_path, stack_env(info), name="fan")  # a fresh session
    try:
        emulator.reset()
        docs = asyncio.run(_burst("http://localhost", paths, proc.http_uds))
        assert emulator.stats()["load_generic_table_credentials"] == 50
        assert idp_stats.token_requests() == 1
        assert [d["outcome"] for d in docs].count("miss") == 50
    finally:
        assert proc.stop() == 0


def test_upstream_429_with_retry_after_is_one_shared_wait(
    info: StackInfo, new_table, emulator
) -> None:
    table = new_table(prefix="slow")
    path = (f"/v1/warehouses/demo/namespaces/{table['namespace']}/tables/"
            f"{table['table']['name']}/credentials")
    emulator.reset()
    emulator.set_faults(status=429, retry_after=1, count=1,
                        operations=["load_generic_table_credentials"])
    docs = asyncio.run(_burst(info.gateway_url, [path] * 50))
    # one refused call, one retry after the shared wait, nothing else
    assert emulator.stats()["load_generic_table_credentials"] == 2
    assert [d["outcome"] for d in docs].count("miss") == 1


def test_hot_key_is_refreshed_ahead_and_never_served_below_the_floor(
    info: StackInfo, new_table, emulator, tmp_path: Path
) -> None:
    table = new_table(prefix="hot")
    env = stack_env(info) | {"LAKEGATE__CACHE__MIN_REMAINING_S": "3",
                             "LAKEGATE__CACHE__REFRESH_LEAD_S": "12",
                             "LAKEGATE__CACHE__IDLE_S": "600"}
    proc = start_gateway(tmp_path, env, name="hot")
    try:
        emulator.set_faults(credential_lifetime_s=20)
        emulator.clear_credential_cache()
        path = (f"/v1/warehouses/demo/namespaces/{table['namespace']}/tables/"
                f"{table['table']['name']}/credentials")
        outcomes: list[str] = []
        expiries: set[int] = set()
        lowest = float("inf")
        with httpx.Client(base_url=proc.http_url, headers=MARK, trust_env=False,
                          timeout=30) as c:
            for _ in range(80):  # ~20 s at 4 requests/s: at least one refresh cycle
                doc = c.get(path).json()
                outcomes.append(doc["outcome"])
                expiries.add(doc["expires_at_ms"])
                lowest = min(lowest, doc["remaining_s"])
                time.sleep(0.25)
        assert outcomes.count("miss") == 1, outcomes
        assert set(outcomes[1:]) == {"hit"}, outcomes
        assert len(expiries) >= 2  # refreshed in the background
        assert lowest > 3
    finally:
        assert proc.stop() == 0
