"""Scenario 5, outages: the catalog down, then the IdP down, each shorter than the remaining
lifetime of the cached credentials, while simulated executors keep asking.

Timeline (time-compressed lifetimes, emulator credential cache cleared first so every hot key
starts with a full lifetime): warm the hot keys; at `outage_catalog_start_s` every catalog call
answers 503 for `outage_catalog_s`, placed so that every hot key crosses its refresh lead inside
the outage (refreshes fail, stale-if-error serves); then the catalog returns and the time until
every hot key is served fresh again (not stale, remaining above the lead) is measured. Then the
IdP process is stopped for `outage_idp_s` and restarted, and the same recovery is measured.
Client errors over the whole run must be 0.
"""

from __future__ import annotations

import threading
import time
from typing import Any

from devstack.metrics_scrape import total
from loadtest.bounds import Deadline
from loadtest.context import BenchContext
from loadtest.executors import ExecutorResult, ExecutorSpec, run_executors
from loadtest.stack import BenchStack, Gateway


def run(ctx: BenchContext) -> dict[str, Any]:
    prof = ctx.profile
    stack = ctx.stack
    tables = [f"outage_t{i:02d}" for i in range(prof.outage_keys)]
    stack.create_tables(tables)
    lifetime = {"credential_lifetime_s": prof.outage_lifetime_s}
    stack.emulator.set_faults(**lifetime)
    stack.emulator.clear_credential_cache()
    gw = stack.start_gateway(
        "outage",
        {
            "LAKEGATE__CACHE__MIN_REMAINING_S": str(prof.outage_min_remaining_s),
            "LAKEGATE__CACHE__REFRESH_LEAD_S": str(prof.outage_refresh_lead_s),
            "LAKEGATE__CACHE__IDLE_S": "300",
            "LAKEGATE__UPSTREAM__DEADLINE_S": "5",
            "LAKEGATE__UPSTREAM__TIMEOUT_S": "2",
        },
    )
    total_s = prof.outage_idp_start_s + prof.outage_idp_s + 25.0
    holder: dict[str, Any] = {}
    spec = ExecutorSpec(
        mode="gateway",
        target=gw.http_uds,
        paths=tuple(stack.native_path(t) for t in tables),
        weights=(1.0,) * len(tables),
        executors=prof.outage_executors,
        duration_s=total_s,
        max_requests=50_000_000,
        think_s=0.02,
        parse=True,
        processes=2,
        cpus=ctx.client_cpus,
    )
    clients = threading.Thread(
        target=lambda: holder.update(result=_safe_run(spec)), name="outage-clients", daemon=True
    )
    out: dict[str, Any] = {}
    try:
        t0 = time.monotonic()
        clients.start()
        _sleep_until(t0 + prof.outage_catalog_start_s)
        ctx.say("outage: catalog down (503 on every call)")
        stack.emulator.set_faults(status=503, **lifetime)
        _sleep_until(t0 + prof.outage_catalog_start_s + prof.outage_catalog_s)
        stack.emulator.set_faults(**lifetime)
        out["catalog"] = {
            "down_s": prof.outage_catalog_s,
            "recovery_s": _recovery(
                stack, gw, tables, prof.outage_refresh_lead_s, prof.recovery_cap_s
            ),
        }
        ctx.say(f"outage: catalog back, recovered in {out['catalog']['recovery_s']} s")
        _sleep_until(t0 + prof.outage_idp_start_s)
        token_expiry = _token_expiry(gw)
        stack.stop_idp()
        ctx.say("outage: IdP stopped (the gateway's token refresh falls due meanwhile)")
        _sleep_until(t0 + prof.outage_idp_start_s + prof.outage_idp_s)
        failed_grants = _token_failures(gw)
        stack.restart_idp()
        restarted = time.monotonic()
        token_s = _new_token(gw, token_expiry, prof.recovery_cap_s)
        keys_s = _recovery(stack, gw, tables, prof.outage_refresh_lead_s, prof.recovery_cap_s)
        out["idp"] = {
            "down_s": prof.outage_idp_s,
            "token_ttl_s": stack.info.idp.token_ttl_s,
            "failed_token_attempts_while_down": failed_grants,
            "new_token_after_s": token_s,
            # from the IdP's return until the gateway has a new token and every key is fresh
            "recovery_s": prof.recovery_cap_s
            if prof.recovery_cap_s in (token_s, keys_s)
            else round(time.monotonic() - restarted, 2),
        }
        ctx.say(f"outage: IdP back, new token after {token_s} s, keys fresh after {keys_s} s")
        clients.join(timeout=total_s + 120)
    finally:
        stack.emulator.clear_faults()
        stack.stop_gateway(gw)
    result = holder.get("result")
    if not isinstance(result, ExecutorResult):
        raise RuntimeError(f"outage clients failed: {result}")
    out.update(
        {
            "client_errors": result.errors,
            "client_requests": result.requests,
            "recovery_s": max(out["catalog"]["recovery_s"], out["idp"]["recovery_s"]),
            "stale_serves": result.outcomes_after_warmup.get("stale", 0),
            "outcomes": result.outcomes_after_warmup,
            "min_remaining_s": round(result.min_remaining_s, 3),
            "floor_s": prof.outage_min_remaining_s,
            "error_samples": result.error_samples,
        }
    )
    return out


def _token_expiry(gw: Gateway) -> float:
    return total(gw.metrics(), "lakegate_idp_token_expiry_timestamp_seconds")


def _token_failures(gw: Gateway) -> int:
    samples = gw.metrics()
    attempts = total(samples, "lakegate_upstream_requests_total", target="idp")
    ok = total(samples, "lakegate_upstream_requests_total", target="idp", status="200")
    return int(attempts - ok)


def _new_token(gw: Gateway, old_expiry: float, cap_s: float) -> float:
    """Seconds until the gateway holds a token newer than `old_expiry` (bounded by cap_s)."""
    start = time.monotonic()
    deadline = Deadline(cap_s)
    while not deadline.expired():
        if _token_expiry(gw) > old_expiry:
            return round(time.monotonic() - start, 2)
        time.sleep(0.25)
    return cap_s


def _safe_run(spec: ExecutorSpec) -> ExecutorResult | str:
    try:
        return run_executors(spec)
    except Exception as exc:  # noqa: BLE001 - reported by the scenario, never swallowed
        return f"{type(exc).__name__}: {exc}"


def _sleep_until(t: float) -> None:
    time.sleep(max(0.0, t - time.monotonic()))


def _recovery(
    stack: BenchStack, gw: Gateway, tables: list[str], lead_s: float, cap_s: float
) -> float:
    """Seconds until every hot key is served fresh: not stale and above the refresh lead.
    Polls each key at most every 0.25 s, for at most `cap_s` (then returns `cap_s`)."""
    import httpx

    start = time.monotonic()
    deadline = Deadline(cap_s)
    pending = set(tables)
    with httpx.Client(
        base_url=gw.http_url, trust_env=False, timeout=10, headers={"X-Lakegate-Request": "1"}
    ) as client:
        while pending and not deadline.expired():
            for table in sorted(pending):
                try:
                    doc = client.get(stack.native_path(table)).json()
                except (httpx.HTTPError, ValueError):
                    continue
                fresh = (
                    doc.get("outcome") != "stale"
                    and doc.get("expires_at_ms", 0) / 1000.0 - time.time() > lead_s
                )
                if fresh:
                    pending.discard(table)
            if pending:
                time.sleep(0.25)
    return round(time.monotonic() - start, 2) if not pending else cap_s
