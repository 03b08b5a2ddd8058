"""Scenario 6, capacity: N distinct keys (N/2 tables x {read, write}).

Two gateways, because the two questions need opposite idle windows:
- memory: a gateway whose idle window is longer than the load, so all N entries are resident at
  once; resident memory (psutil RSS) after one warm-up request vs after loading every key;
- idle keys: a gateway with a short idle window and time-compressed lifetimes loads a subset of
  the keys once, then nobody uses them for longer than it takes every key to enter its refresh
  lead; refresh-ahead runs and upstream credential calls in that window must both be 0.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from devstack.metrics_scrape import total
from loadtest.child import rss_bytes
from loadtest.context import BenchContext
from loadtest.scenarios.cold_herd import credential_calls
from loadtest.stack import Gateway

_MIB = 1024 * 1024


def run(ctx: BenchContext) -> dict[str, Any]:
    prof = ctx.profile
    stack = ctx.stack
    n_tables = prof.capacity_keys // 2
    tables = [f"cap_{i:05d}" for i in range(n_tables)]
    create_s = stack.create_tables(tables, concurrency=64)
    ctx.say(f"capacity: created {n_tables} tables in {create_s:.1f} s")
    paths = [stack.native_path(t, a) for t in tables for a in ("read", "write")]
    out: dict[str, Any] = {"keys": len(paths)}
    gw = stack.start_gateway(
        "capacity-memory",
        {
            "LAKEGATE__CACHE__MAX_ENTRIES": str(prof.capacity_keys + 2000),
            "LAKEGATE__CACHE__IDLE_S": "3600",
        },
    )
    try:
        asyncio.run(_fetch_all(gw, paths[:1], 1))  # warm: token, warehouse, code paths
        time.sleep(1.0)
        rss_idle = rss_bytes(gw.pid)
        t0 = time.monotonic()
        errors = asyncio.run(_fetch_all(gw, paths, 64))
        load_s = time.monotonic() - t0
        rss_loaded = rss_bytes(gw.pid)
        entries = total(gw.metrics(), "lakegate_cache_entries")
    finally:
        stack.stop_gateway(gw)
    out.update(
        {
            "load_errors": errors,
            "load_s": round(load_s, 2),
            "rss_idle_mib": round(rss_idle / _MIB, 1),
            "rss_loaded_mib": round(rss_loaded / _MIB, 1),
            "rss_delta_mib": round((rss_loaded - rss_idle) / _MIB, 1),
            "cache_entries_after_load": entries,
        }
    )
    ctx.say(
        f"capacity: {len(paths)} keys in {load_s:.1f} s, errors={errors}, "
        f"rss {rss_idle / _MIB:.1f} -> {rss_loaded / _MIB:.1f} MiB, entries={entries}"
    )
    out.update(_idle_keys(ctx, paths[: prof.capacity_idle_keys]))
    return out


def _idle_keys(ctx: BenchContext, paths: list[str]) -> dict[str, Any]:
    prof = ctx.profile
    stack = ctx.stack
    stack.emulator.set_faults(credential_lifetime_s=prof.capacity_lifetime_s)
    gw = stack.start_gateway(
        "capacity-idle",
        {
            "LAKEGATE__CACHE__REFRESH_LEAD_S": str(prof.capacity_refresh_lead_s),
            "LAKEGATE__CACHE__MIN_REMAINING_S": "5",
            "LAKEGATE__CACHE__IDLE_S": str(prof.capacity_idle_s),
            "LAKEGATE__CACHE__REFRESH_RATE_PER_S": "300",
        },
    )
    try:
        errors = asyncio.run(_fetch_all(gw, paths, 64))
        m_loaded, before = gw.metrics(), stack.emulator.stats()
        time.sleep(prof.capacity_observe_s)
        after, m_after = stack.emulator.stats(), gw.metrics()
    finally:
        stack.emulator.clear_faults()
        stack.stop_gateway(gw)
    ahead = "lakegate_refresh_total"
    result = {
        "idle_keys": len(paths),
        "idle_load_errors": errors,
        "idle_window_s": prof.capacity_observe_s,
        "idle_settings": {
            "advertised_lifetime_s": prof.capacity_lifetime_s,
            "refresh_lead_s": prof.capacity_refresh_lead_s,
            "idle_s": prof.capacity_idle_s,
        },
        "idle_refreshes": total(m_after, ahead, reason="ahead")
        - total(m_loaded, ahead, reason="ahead"),
        "idle_upstream_credential_calls": credential_calls(before, after),
        "evictions_idle": total(m_after, "lakegate_evictions_total", reason="idle"),
    }
    ctx.say(f"capacity idle keys: {result}")
    return result


async def _fetch_all(gw: Gateway, paths: list[str], concurrency: int) -> int:
    """GET every path once over the gateway's UDS; returns the number of failures."""
    import aiohttp

    sem = asyncio.Semaphore(concurrency)
    failures = 0
    connector = aiohttp.UnixConnector(path=gw.http_uds[len("unix:") :], limit=concurrency)
    async with aiohttp.ClientSession(
        connector=connector, headers={"X-Lakegate-Request": "1"}
    ) as session:

        async def one(path: str) -> None:
            nonlocal failures
            async with sem:
                try:
                    async with session.get(
                        "http://localhost" + path, timeout=aiohttp.ClientTimeout(total=60)
                    ) as resp:
                        await resp.read()
                        if resp.status != 200:
                            failures += 1
                except (aiohttp.ClientError, TimeoutError):
                    failures += 1

        await asyncio.gather(*(one(p) for p in paths))
    return failures
