"""Scenario 4, refresh soak, time-compressed.

The emulator advertises short credential lifetimes (`credential_lifetime_s` fault knob) and the
gateway runs with its serve floor and refresh lead scaled down in proportion. Simulated executors
hammer a few hot keys for several lifetimes; every answer is parsed and its remaining lifetime
computed from `expires_at_ms` against the local clock when it arrives.
Reported: errors, misses (miss or coalesced) on hot keys after warm-up, the minimum remaining
lifetime served, and upstream credential calls per key per lifetime.
"""

from __future__ import annotations

from typing import Any

from devstack.metrics_scrape import total
from loadtest.context import BenchContext
from loadtest.executors import ExecutorSpec, run_executors
from loadtest.scenarios.cold_herd import CREDENTIAL_OPS
from loadtest.stack import delta


def run(ctx: BenchContext) -> dict[str, Any]:
    prof = ctx.profile
    stack = ctx.stack
    tables = [f"soak_t{i:02d}" for i in range(prof.soak_keys)]
    stack.create_tables(tables)
    stack.emulator.set_faults(credential_lifetime_s=prof.soak_lifetime_s)
    stack.emulator.clear_credential_cache()
    gw = stack.start_gateway(
        "soak",
        {
            "LAKEGATE__CACHE__MIN_REMAINING_S": str(prof.soak_min_remaining_s),
            "LAKEGATE__CACHE__REFRESH_LEAD_S": str(prof.soak_refresh_lead_s),
            "LAKEGATE__CACHE__IDLE_S": "300",
            "LAKEGATE__CACHE__MAX_ENTRIES": "1000",
        },
    )
    try:
        before, m0 = stack.emulator.stats(), gw.metrics()
        result = run_executors(
            ExecutorSpec(
                mode="gateway",
                target=gw.http_uds,
                paths=tuple(stack.native_path(t) for t in tables),
                weights=(1.0,) * len(tables),
                executors=prof.soak_executors,
                duration_s=prof.soak_duration_s,
                max_requests=50_000_000,
                think_s=0.01,
                warmup_s=prof.soak_warmup_s,
                parse=True,
                processes=2,
                cpus=ctx.client_cpus,
            )
        )
        after, m1 = stack.emulator.stats(), gw.metrics()
    finally:
        stack.emulator.clear_faults()
        stack.stop_gateway(gw)
    cred_calls = sum(delta(before, after, op) for op in CREDENTIAL_OPS)
    lifetimes = prof.soak_duration_s / prof.soak_lifetime_s
    outcomes = result.outcomes_after_warmup
    out = {
        "errors": result.errors,
        "requests": result.requests,
        "misses_after_warmup": outcomes.get("miss", 0) + outcomes.get("coalesced", 0),
        "outcomes_after_warmup": outcomes,
        "min_remaining_s": round(result.min_remaining_s, 3),
        "floor_s": prof.soak_min_remaining_s,
        "advertised_lifetime_s": prof.soak_lifetime_s,
        "refresh_lead_s": prof.soak_refresh_lead_s,
        "duration_s": prof.soak_duration_s,
        "keys": len(tables),
        "upstream_credential_calls": cred_calls,
        "upstream_calls_per_key_per_lifetime": round(cred_calls / len(tables) / lifetimes, 3),
        "refresh_ahead_ok": total(m1, "lakegate_refresh_total", reason="ahead", status="ok")
        - total(m0, "lakegate_refresh_total", reason="ahead", status="ok"),
        "refresh_errors": total(m1, "lakegate_refresh_total", status="error")
        - total(m0, "lakegate_refresh_total", status="error"),
        "error_samples": result.error_samples,
    }
    ctx.say(
        f"soak: errors={out['errors']} misses={out['misses_after_warmup']} "
        f"min_remaining={out['min_remaining_s']} s calls/key/lifetime="
        f"{out['upstream_calls_per_key_per_lifetime']}"
    )
    return out
