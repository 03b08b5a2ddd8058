"""Scenario 3, executors: P processes x C simulated executors x T tables, Zipf popularity, for a
fixed duration, with a time-compressed credential lifetime, three ways:

- `gateway`: every executor asks its node's gateway (native HTTP over UDS) on every request;
- `direct`: every executor is a pylakekeeper client with its own IdP grant and one vended `load`
  per request (the straw man);
- `direct_memo`: `direct` plus a per-executor memo of each table's credential until the serve
  floor (the strongest baseline a careful user builds without a gateway).

Upstream calls are counted by the emulator (every Lakekeeper operation), IdP token requests by the
IdP, STS calls by the emulator; the gateway's identity loads (metadata loads that vend nothing)
are counted apart from its credential calls. The headline is upstream credential calls per table
per credential lifetime: about 1 per node with the gateway, about 1 per executor that touches the
table without.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from loadtest.context import BenchContext
from loadtest.executors import (
    ExecutorMode,
    ExecutorResult,
    ExecutorSpec,
    run_executors,
    zipf_weights,
)
from loadtest.profile import Profile
from loadtest.scenarios.cold_herd import IDENTITY_OP, credential_calls
from loadtest.stack import catalog_calls, delta

MODES: tuple[ExecutorMode, ...] = ("gateway", "direct", "direct_memo")


def compressed_cache_env(prof: Profile) -> dict[str, str]:
    """Gateway settings matching the compressed lifetime (same proportions as deploy/k8s)."""
    return {
        "LAKEGATE__CACHE__MIN_REMAINING_S": str(prof.exec_min_remaining_s),
        "LAKEGATE__CACHE__REFRESH_LEAD_S": str(prof.exec_refresh_lead_s),
        "LAKEGATE__CACHE__IDLE_S": "300",
    }


def per_table_lifetime(credential_calls: int, tables: int, duration_s: float,
                       lifetime_s: float) -> float:
    """Upstream credential calls per table per credential lifetime (the run spans
    `duration_s / lifetime_s` lifetimes)."""
    lifetimes = duration_s / lifetime_s
    return round(credential_calls / max(1, tables) / lifetimes, 3)


def run(ctx: BenchContext) -> dict[str, Any]:
    prof = ctx.profile
    stack = ctx.stack
    tables = [f"exec_t{i:03d}" for i in range(prof.exec_tables)]
    stack.create_tables(tables)
    weights = tuple(zipf_weights(len(tables)))
    executors = prof.exec_processes * prof.exec_per_process
    base = ExecutorSpec(
        mode="gateway",
        target="",
        paths=(),
        weights=weights,
        executors=executors,
        duration_s=prof.exec_duration_s,
        max_requests=50_000_000,
        think_s=prof.exec_think_s,
        processes=prof.exec_processes,
        cpus=ctx.client_cpus,
    )
    client = stack.info.idp.clients["direct"]
    direct = replace(
        base,
        mode="direct",
        target=stack.info.catalog.url,
        paths=tuple(stack.catalog_load_path(t) for t in tables),
        token_url=stack.info.idp.token_url,
        client_id=client.id,
        client_secret=client.secret,
    )
    out: dict[str, Any] = {}
    stack.emulator.set_faults(credential_lifetime_s=prof.exec_lifetime_s)
    try:
        for mode in MODES:
            stack.emulator.clear_credential_cache()
            stack.idp.reset()
            before = stack.emulator.stats()
            if mode == "gateway":
                gw = stack.start_gateway("executors", compressed_cache_env(prof))
                try:
                    result = run_executors(replace(
                        base, target=gw.http_uds,
                        paths=tuple(stack.native_path(t) for t in tables)))
                finally:
                    stack.stop_gateway(gw)
            else:
                result = run_executors(replace(direct, mode=mode,
                                               floor_s=prof.exec_min_remaining_s))
            out[mode] = _report(result, before, stack.emulator.stats(),
                                stack.idp.token_requests(), prof, len(tables))
            ctx.say(f"executors {mode}: {out[mode]}")
    finally:
        stack.emulator.clear_faults()
    gateway = out["gateway"]
    return {
        **out,
        "amplification": round(gateway["client_requests"] / max(1, gateway["upstream_calls"]), 1),
        "direct_amplification": round(
            out["direct"]["client_requests"] / max(1, out["direct"]["upstream_calls"]), 3
        ),
        "reduction_vs_direct_memo": round(
            out["direct_memo"]["credential_calls"] / max(1, gateway["credential_calls"]), 1
        ),
        "setup": {
            "processes": prof.exec_processes,
            "executors": executors,
            "tables": len(tables),
            "duration_s": prof.exec_duration_s,
            "think_s": prof.exec_think_s,
            "popularity": "zipf s=1.1",
            "credential_lifetime_s": prof.exec_lifetime_s,
            "refresh_lead_s": prof.exec_refresh_lead_s,
            "serve_floor_s": prof.exec_min_remaining_s,
        },
    }


def _report(result: ExecutorResult, before: dict[str, int], after: dict[str, int],
            idp_requests: int, prof: Profile, tables: int) -> dict[str, Any]:
    calls = credential_calls(before, after)
    return {
        "client_requests": result.requests,
        "upstream_calls": catalog_calls(before, after),
        "credential_calls": calls,
        # Metadata loads that vend nothing (the gateway's table identity checks): a cold start
        # is confirmed by its own fills, so none is due before the identity TTL (30 s, the
        # length of the run) runs out.
        "identity_loads": delta(before, after, IDENTITY_OP),
        "credential_calls_per_table_lifetime": per_table_lifetime(
            calls, tables, prof.exec_duration_s, prof.exec_lifetime_s),
        "memo_hits": result.memo_hits,
        "idp_requests": idp_requests,
        "sts_calls": delta(before, after, "sts_assume_role"),
        "errors": result.errors,
        "rps": round(result.requests / result.elapsed_s, 1) if result.elapsed_s else 0.0,
        "latency_ms": result.hist.summary_ms(),
        "error_samples": result.error_samples,
    }
