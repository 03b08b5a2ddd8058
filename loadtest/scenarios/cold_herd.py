"""Scenario 1, cold herd: K concurrent requests for one uncached table.

For each K a fresh table is used. Every connection is opened first; then all K requests are
released at once (HTTP over the gateway's UDS, several generator processes). The emulator adds a
fixed latency to the credential call so the herd really overlaps one in-flight upstream call.
Reported: upstream credential calls (must be 1) and the waiters' extra latency, i.e. each
request's latency minus the duration of the single upstream call (from the gateway's own
`lakegate_upstream_request_duration_seconds`, so it is the real call, not the injected delay).

Right after each herd, the same burst (same generator, processes and pinning) goes to the
trivial aiohttp server answering the gateway's own credentials body over its UDS:
`baseline_p99_ms` is what answering K concurrent requests costs a server that does nothing else,
the yardstick of the herd tail (target: p99 extra <= 1.5 x the baseline's p99, or 5 ms,
whichever is larger). A herd up to ``herd_repeat_max_k`` runs ``herd_repeats`` times, each on a
fresh table and followed by its baseline burst; the K is reported by the median of the repeats'
p99 extras and of their baseline p99s (every repeat's figures are kept), and its upstream calls
are 1 only if every repeat made exactly one.
"""

from __future__ import annotations

import statistics
from dataclasses import replace
from typing import Any

from devstack.metrics_scrape import Samples, total
from loadtest.baselines import synthetic_grpc_body
from loadtest.bounds import Bounds
from loadtest.child import ChildProcess, start_baseline
from loadtest.context import BenchContext
from loadtest.profile import Profile
from loadtest.profiler import Sampler, py_spy, top_frames
from loadtest.rawhttp import build_request
from loadtest.spec import LoadSpec
from loadtest.stack import Gateway, delta, http_sample
from loadtest.workers import LoadRunError, run_load

CREDENTIAL_OPS = ("load_generic_table", "load_generic_table_credentials")
HERD_PROFILE_S = 15.0  # covers the largest burst, connection set-up included
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
    tables = {k: [f"herd_k{k}_r{r}" for r in range(_repeats(prof, k))] for k in prof.herd_ks}
    stack.create_tables([t for names in tables.values() for t in names])
    gw = stack.start_gateway("cold-herd")
    baseline: ChildProcess | None = None
    out: dict[str, Any] = {}
    try:
        stack.emulator.set_faults(
            latency_ms=prof.herd_upstream_latency_ms, operations=list(CREDENTIAL_OPS)
        )
        # resolve the warehouse once so each herd measures the credential call only
        build = build_request("GET", stack.native_path("herd_warm"), {"X-Lakegate-Request": "1"})
        stack.create_tables(["herd_warm"])
        run_load(LoadSpec("http", gw.http_uds, build, "burst", 1, Bounds(1, 30), processes=1))
        body = http_sample(gw.http_url + stack.native_path("herd_warm"))
        baseline, _ = start_baseline(ctx.work_dir, ctx.server_cpus, body,
                                     synthetic_grpc_body())
        base_uds = f"unix:{ctx.work_dir / 'baseline-http.sock'}"
        for k in prof.herd_ks:
            try:
                rows = [_herd(ctx, gw, k, table, base_uds) for table in tables[k]]
            except LoadRunError as exc:  # one K failing must not hide the others
                out[str(k)] = {"error": str(exc)[:300]}
                ctx.say(f"cold herd K={k}: failed: {exc}")
                continue
            out[str(k)] = row = _median_repeat(rows)
            lat = row["latency_ms"]
            ctx.say(
                f"cold herd K={k} ({len(rows)} herd(s), the median one): "
                f"upstream={row['upstream_calls']} p99={lat['p99']} ms "
                f"upstream_call={row['upstream_ms']:.1f} ms errors={row['errors']}; "
                f"p99 extra {row['p99_extra_ms']} ms, trivial server "
                f"p99={row.get('baseline_p99_ms')} ms"
            )
        if ctx.profile_dir is not None:
            out["profile"] = _profiled_herd(ctx, gw, max(prof.herd_ks))
    finally:
        stack.emulator.clear_faults()
        if baseline is not None:
            baseline.stop()
        stack.stop_gateway(gw)
    return out


def _repeats(prof: Profile, k: int) -> int:
    return prof.herd_repeats if k <= prof.herd_repeat_max_k else 1


def _herd(ctx: BenchContext, gw: Gateway, k: int, table: str, base_uds: str) -> dict[str, Any]:
    """One herd of ``k`` on a fresh table, then the same burst to the trivial server."""
    stack, prof = ctx.stack, ctx.profile
    before, m0 = stack.emulator.stats(), gw.metrics()
    req = build_request("GET", stack.native_path(table), {"X-Lakegate-Request": "1"})
    spec = LoadSpec("http", gw.http_uds, req, "burst", k, Bounds(k, 120.0),
                    processes=min(prof.herd_processes, k), cpus=ctx.client_cpus,
                    count_outcomes=True)
    result = run_load(spec)
    base_lat = _baseline_burst(replace(spec, target=base_uds))
    after, m1 = stack.emulator.stats(), gw.metrics()
    up_sum = _upstream(m1, "sum") - _upstream(m0, "sum")
    up_count = _upstream(m1, "count") - _upstream(m0, "count")
    upstream_ms = (up_sum / up_count * 1000.0) if up_count > 0 else prof.herd_upstream_latency_ms
    lat = result.hist.summary_ms()
    return {
        "upstream_calls": credential_calls(before, after),
        "p99_extra_ms": round(max(0.0, lat["p99"] - upstream_ms), 3),
        "p50_extra_ms": round(max(0.0, lat["p50"] - upstream_ms), 3),
        "upstream_ms": round(upstream_ms, 3),
        "latency_ms": lat,
        "requests": result.requests,
        "errors": result.errors,
        "outcomes": result.outcomes,
        "error_samples": result.error_samples,
        **base_lat,
    }


def _median_repeat(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """One K's figures from its repeats: the median repeat's row (by p99 extra), with the
    medians of the p99 extras and of the baseline p99s, every repeat's figures, the total
    errors, and upstream calls 1 only if every repeat made exactly one."""
    ranked = sorted(rows, key=lambda r: r["p99_extra_ms"])
    row = dict(ranked[(len(ranked) - 1) // 2])
    row["repeats"] = len(rows)
    if len(rows) == 1:
        return row
    row["p99_extra_ms"] = round(statistics.median(r["p99_extra_ms"] for r in rows), 3)
    row["p99_extra_ms_each"] = [r["p99_extra_ms"] for r in rows]
    bases = [r["baseline_p99_ms"] for r in rows
             if isinstance(r.get("baseline_p99_ms"), float | int)]
    if bases:
        row["baseline_p99_ms"] = round(statistics.median(bases), 3)
        row["baseline_p99_ms_each"] = bases
    calls = [r["upstream_calls"] for r in rows]
    row["upstream_calls"] = next((c for c in calls if c != 1), 1)
    row["upstream_calls_each"] = calls
    row["errors"] = sum(r["errors"] for r in rows)
    row["requests"] = sum(r["requests"] for r in rows)
    return row


def _profiled_herd(ctx: BenchContext, gw: Gateway, k: int) -> dict[str, Any]:
    """With `--profile`: one more herd of `k` on a fresh table, not part of any figure, with
    py-spy on the gateway across it (connections opened, then the burst answered; idle
    samples are not recorded)."""
    exe = py_spy()
    assert exe is not None
    assert ctx.profile_dir is not None
    ctx.profile_dir.mkdir(parents=True, exist_ok=True)
    out = ctx.profile_dir / "profile-cold_herd.txt"
    out.unlink(missing_ok=True)
    ctx.stack.create_tables(["herd_profile"])
    req = build_request("GET", ctx.stack.native_path("herd_profile"),
                        {"X-Lakegate-Request": "1"})
    spec = LoadSpec("http", gw.http_uds, req, "burst", k, Bounds(k, 120.0),
                    processes=min(ctx.profile.herd_processes, k), cpus=ctx.client_cpus)
    sampler = Sampler(exe, gw.pid, out, HERD_PROFILE_S)
    try:
        run_load(spec)
    except LoadRunError as exc:
        sampler.wait(timeout_s=HERD_PROFILE_S + 30.0)
        return {"error": str(exc)[:300]}
    error = sampler.wait(timeout_s=HERD_PROFILE_S + 30.0)
    if error is not None:
        return {"error": error}
    top = top_frames(out.read_text())
    ctx.say(f"cold herd K={k} profile: {top['samples']} samples; top self {top['self_pct'][:3]}")
    return {"file": out.name, "k": k, **top}


def _baseline_burst(spec: LoadSpec) -> dict[str, Any]:
    """The same burst against the trivial server: its p50/p99 (or the error)."""
    try:
        result = run_load(spec)
    except LoadRunError as exc:
        return {"baseline_error": str(exc)[:300]}
    lat = result.hist.summary_ms()
    return {"baseline_p50_ms": lat["p50"], "baseline_p99_ms": lat["p99"],
            "baseline_errors": result.errors}


def _upstream(samples: Samples, kind: str) -> float:
    return total(
        samples,
        f"lakegate_upstream_request_duration_seconds_{kind}",
        target="catalog",
        op="load_credentials",
    )
