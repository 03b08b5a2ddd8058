"""Scenario 3, executors: P processes x C simulated executors x T tables, Zipf popularity, for a
fixed duration, through a fresh gateway and then direct (pylakekeeper-style, one IdP grant per
executor and one catalog call per request).

Upstream calls are counted by the emulator (every Lakekeeper operation), IdP token requests by the
IdP, STS calls by the emulator; the IdP counter is reset before the gateway starts, so its own
login is counted.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from loadtest.context import BenchContext
from loadtest.executors import ExecutorResult, ExecutorSpec, run_executors, zipf_weights
from loadtest.stack import catalog_calls, delta


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

    stack.idp.reset()
    before = stack.emulator.stats()
    gw = stack.start_gateway("executors")
    try:
        via_gw = run_executors(
            replace(base, target=gw.http_uds, paths=tuple(stack.native_path(t) for t in tables))
        )
        after = stack.emulator.stats()
        gateway = _report(via_gw, before, after, stack.idp.token_requests())
    finally:
        stack.stop_gateway(gw)
    ctx.say(f"executors via gateway: {gateway}")

    client = stack.info["idp"]["clients"]["direct"]
    stack.idp.reset()
    before = stack.emulator.stats()
    direct_run = run_executors(
        replace(
            base,
            mode="direct",
            target=stack.info["catalog"]["url"],
            paths=tuple(stack.catalog_load_path(t) for t in tables),
            token_url=stack.info["idp"]["token_url"],
            client_id=client["id"],
            client_secret=client["secret"],
        )
    )
    after = stack.emulator.stats()
    direct = _report(direct_run, before, after, stack.idp.token_requests())
    ctx.say(f"executors direct: {direct}")
    amp = gateway["client_requests"] / max(1, gateway["upstream_calls"])
    return {
        "gateway": gateway,
        "direct": direct,
        "amplification": round(amp, 1),
        "direct_amplification": round(
            direct["client_requests"] / max(1, direct["upstream_calls"]), 3
        ),
        "setup": {
            "processes": prof.exec_processes,
            "executors": executors,
            "tables": len(tables),
            "duration_s": prof.exec_duration_s,
            "think_s": prof.exec_think_s,
            "popularity": "zipf s=1.1",
        },
    }


def _report(
    result: ExecutorResult, before: dict[str, int], after: dict[str, int], idp_requests: int
) -> dict[str, Any]:
    return {
        "client_requests": result.requests,
        "upstream_calls": catalog_calls(before, after),
        "idp_requests": idp_requests,
        "sts_calls": delta(before, after, "sts_assume_role"),
        "errors": result.errors,
        "rps": round(result.requests / result.elapsed_s, 1) if result.elapsed_s else 0.0,
        "latency_ms": result.hist.summary_ms(),
        "error_samples": result.error_samples,
    }
