"""Scenario 1, cold herd: K concurrent requests for one uncached table.

For each K a fresh table is used. Every connection is opened first; then all K requests are
released at once (HTTP over the gateway's UDS, several generator processes). The emulator adds a
fixed latency to the credential call so the herd really overlaps one in-flight upstream call.
Reported: upstream credential calls (must be 1) and the waiters' extra latency, i.e. each
request's latency minus the duration of the single upstream call (from the gateway's own
`lakegate_upstream_request_duration_seconds`, so it is the real call, not the injected delay).
"""

from __future__ import annotations

from typing import Any

from devstack.metrics_scrape import Samples, total
from loadtest.bounds import Bounds
from loadtest.context import BenchContext
from loadtest.rawhttp import build_request
from loadtest.spec import LoadSpec
from loadtest.stack import delta
from loadtest.workers import LoadRunError, run_load

CREDENTIAL_OPS = ("load_generic_table", "load_generic_table_credentials")
# Generic loads that vend nothing: the gateways' table identity re-checks (issue #27), not
# credential calls.
IDENTITY_OP = "load_generic_table_unvended"


def credential_calls(before: dict[str, int], after: dict[str, int]) -> int:
    """Upstream credential calls between two emulator snapshots (identity loads left out)."""
    return (sum(delta(before, after, op) for op in CREDENTIAL_OPS)
            - delta(before, after, IDENTITY_OP))


def run(ctx: BenchContext) -> dict[str, Any]:
    prof = ctx.profile
    stack = ctx.stack
    tables = [f"herd_k{k}" for k in prof.herd_ks]
    stack.create_tables(tables)
    gw = stack.start_gateway("cold-herd")
    out: dict[str, Any] = {}
    try:
        stack.emulator.set_faults(
            latency_ms=prof.herd_upstream_latency_ms, operations=list(CREDENTIAL_OPS)
        )
        # resolve the warehouse once so each herd measures the credential call only
        build = build_request("GET", stack.native_path("herd_warm"), {"X-Lakegate-Request": "1"})
        stack.create_tables(["herd_warm"])
        run_load(LoadSpec("http", gw.http_uds, build, "burst", 1, Bounds(1, 30), processes=1))
        for k, table in zip(prof.herd_ks, tables, strict=True):
            before, m0 = stack.emulator.stats(), gw.metrics()
            req = build_request("GET", stack.native_path(table), {"X-Lakegate-Request": "1"})
            spec = LoadSpec(
                "http",
                gw.http_uds,
                req,
                "burst",
                k,
                Bounds(k, 120.0),
                processes=min(prof.herd_processes, k),
                cpus=ctx.client_cpus,
                count_outcomes=True,
            )
            try:
                result = run_load(spec)
            except LoadRunError as exc:  # one K failing must not hide the others
                out[str(k)] = {"error": str(exc)[:300]}
                ctx.say(f"cold herd K={k}: failed: {exc}")
                continue
            after, m1 = stack.emulator.stats(), gw.metrics()
            upstream = credential_calls(before, after)
            up_sum = _upstream(m1, "sum") - _upstream(m0, "sum")
            up_count = _upstream(m1, "count") - _upstream(m0, "count")
            upstream_ms = (
                (up_sum / up_count * 1000.0) if up_count > 0 else prof.herd_upstream_latency_ms
            )
            lat = result.hist.summary_ms()
            out[str(k)] = {
                "upstream_calls": upstream,
                "p99_extra_ms": round(max(0.0, lat["p99"] - upstream_ms), 3),
                "p50_extra_ms": round(max(0.0, lat["p50"] - upstream_ms), 3),
                "upstream_ms": round(upstream_ms, 3),
                "latency_ms": lat,
                "requests": result.requests,
                "errors": result.errors,
                "outcomes": result.outcomes,
                "error_samples": result.error_samples,
            }
            ctx.say(
                f"cold herd K={k}: upstream={upstream} p99={lat['p99']} ms "
                f"upstream_call={upstream_ms:.1f} ms errors={result.errors}"
            )
    finally:
        stack.emulator.clear_faults()
        stack.stop_gateway(gw)
    return out


def _upstream(samples: Samples, kind: str) -> float:
    return total(
        samples,
        f"lakegate_upstream_request_duration_seconds_{kind}",
        target="catalog",
        op="load_credentials",
    )
