"""Scenario 6, capacity: 10,000 distinct keys (half the tables read, half write... i.e. N/2
tables x {read, write}) loaded into one gateway; resident memory before and after; then an idle
window in which no key is used, long enough for every key to enter its refresh lead, and the
refreshes and upstream calls in that window must be 0 (idle keys are not refreshed).
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from loadtest.context import BenchContext
from loadtest.scenarios.cold_herd import CREDENTIAL_OPS
from loadtest.stack import BenchStack, Gateway, delta, metric_sum

_MIB = 1024 * 1024


def run(ctx: BenchContext) -> dict[str, Any]:
    prof = ctx.profile
    stack = ctx.stack
    n_tables = prof.capacity_keys // 2
    tables = [f"cap_{i:05d}" for i in range(n_tables)]
    create_s = stack.create_tables(tables, concurrency=32)
    ctx.say(f"capacity: created {n_tables} tables in {create_s:.1f} s")
    stack.emulator.set_faults(credential_lifetime_s=prof.capacity_lifetime_s)
    gw = stack.start_gateway("capacity", {
        "LAKEGATE__CACHE__MAX_ENTRIES": str(prof.capacity_keys + 2000),
        "LAKEGATE__CACHE__REFRESH_LEAD_S": str(prof.capacity_refresh_lead_s),
        "LAKEGATE__CACHE__MIN_REMAINING_S": "5",
        "LAKEGATE__CACHE__IDLE_S": str(prof.capacity_idle_s),
        "LAKEGATE__CACHE__REFRESH_RATE_PER_S": "300",
    })
    try:
        paths = [stack.native_path(t, a) for t in tables for a in ("read", "write")]
        asyncio.run(_fetch_all(gw, paths[:1], 1))  # warm: token, warehouse, code paths
        time.sleep(1.0)
        rss_idle = gw.child.rss_bytes()
        t0 = time.monotonic()
        errors = asyncio.run(_fetch_all(gw, paths, 64))
        load_s = time.monotonic() - t0
        rss_loaded = gw.child.rss_bytes()
        m_loaded = gw.metrics()
        entries = metric_sum(m_loaded, "lakegate_cache_entries")
        ctx.say(f"capacity: {len(paths)} keys in {load_s:.1f} s, errors={errors}, "
                f"rss {rss_idle / _MIB:.1f} -> {rss_loaded / _MIB:.1f} MiB, entries={entries}")
        before = stack.emulator.stats()
        time.sleep(prof.capacity_observe_s)
        after, m_after = stack.emulator.stats(), gw.metrics()
    finally:
        stack.emulator.clear_faults()
        stack.stop_gateway(gw)
    idle_refreshes = metric_sum(m_after, "lakegate_refresh_total", reason="ahead") - \
        metric_sum(m_loaded, "lakegate_refresh_total", reason="ahead")
    return {
        "keys": len(paths),
        "load_errors": errors,
        "load_s": round(load_s, 2),
        "rss_idle_mib": round(rss_idle / _MIB, 1),
        "rss_loaded_mib": round(rss_loaded / _MIB, 1),
        "rss_delta_mib": round((rss_loaded - rss_idle) / _MIB, 1),
        "cache_entries_after_load": entries,
        "idle_window_s": prof.capacity_observe_s,
        "idle_refreshes": idle_refreshes,
        "idle_upstream_credential_calls": sum(delta(before, after, op) for op in CREDENTIAL_OPS),
        "evictions_idle": metric_sum(m_after, "lakegate_evictions_total", reason="idle"),
    }


async def _fetch_all(gw: Gateway, paths: list[str], concurrency: int) -> int:
    """GET every path once over the gateway's UDS; returns the number of failures."""
    import aiohttp

    sem = asyncio.Semaphore(concurrency)
    failures = 0
    connector = aiohttp.UnixConnector(path=gw.http_uds[len("unix:"):], limit=concurrency)
    async with aiohttp.ClientSession(connector=connector,
                                     headers={"X-Lakegate-Request": "1"}) as session:
        async def one(path: str) -> None:
            nonlocal failures
            async with sem:
                try:
                    async with session.get("http://gateway" + path,
                                           timeout=aiohttp.ClientTimeout(total=60)) as resp:
                        await resp.read()
                        if resp.status != 200:
                            failures += 1
                except (aiohttp.ClientError, TimeoutError):
                    failures += 1
        await asyncio.gather(*(one(p) for p in paths))
    return failures


__all__ = ["BenchStack", "run"]
