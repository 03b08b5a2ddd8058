"""The soak: ~20 minutes of steady load with short advertised lifetimes and a fault every couple
of minutes. Verdict: 0 expired or below-floor credentials served, flat memory, flat open fds.

Not part of `make test` or `make harden`; run with `make soak` (`python -m hardening --soak`).
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from devstack.metrics_scrape import scrape, summarize
from hardening.environment import start_environment, stop_environment
from hardening.fault_proxy import ProxyMode
from hardening.faults import EVIDENCE, FaultBench, FaultTiming
from hardening.leaks import snapshot
from hardening.load import LoadFleet
from hardening.report import FaultResult, HardeningReport

SAMPLE_EVERY_S = 10.0
FAULT_EVERY_S = 120.0
FAULT_HOLD_S = 8.0
# Flatness: the last fifth of the run against the fifth after warm-up.
RSS_GROWTH_LIMIT = 0.15
RSS_GROWTH_FLOOR_BYTES = 16 << 20
FD_GROWTH_LIMIT = 12


@dataclass(frozen=True)
class Sample:
    t_s: float
    rss_bytes: int
    fds: int
    connections: int
    threads: int


def flatness(samples: list[Sample]) -> tuple[list[str], dict[str, float]]:
    """Compare the early and late windows (median, robust to one spike during a fault)."""
    if len(samples) < 10:
        return ["too few samples to judge flatness"], {}
    fifth = max(2, len(samples) // 5)
    early = samples[fifth : 2 * fifth]  # skip the first fifth: caches and pools warm up
    late = samples[-fifth:]
    rss_early = statistics.median(s.rss_bytes for s in early)
    rss_late = statistics.median(s.rss_bytes for s in late)
    fd_early = statistics.median(s.fds for s in early)
    fd_late = statistics.median(s.fds for s in late)
    problems = []
    growth = rss_late - rss_early
    if growth > max(RSS_GROWTH_FLOOR_BYTES, RSS_GROWTH_LIMIT * rss_early):
        problems.append(f"memory grew {rss_early / 2**20:.1f} -> {rss_late / 2**20:.1f} MiB")
    if fd_late - fd_early > FD_GROWTH_LIMIT:
        problems.append(f"open fds grew {fd_early:.0f} -> {fd_late:.0f}")
    return problems, {
        "rss_early_mib": round(rss_early / 2**20, 1),
        "rss_late_mib": round(rss_late / 2**20, 1),
        "fds_early": fd_early,
        "fds_late": fd_late,
        "rss_max_mib": round(max(s.rss_bytes for s in samples) / 2**20, 1),
        "fds_max": max(s.fds for s in samples),
    }


def run_soak(run_dir: Path, repo_root: Path, *, minutes: float = 20.0) -> HardeningReport:
    report = HardeningReport()
    started = time.monotonic()
    ctx = start_environment(run_dir, repo_root, token_ttl_s=120)
    result = FaultResult(name=f"soak_{minutes:g}min_periodic_faults")
    samples: list[Sample] = []
    injected: list[str] = []
    try:
        bench = FaultBench(ctx, FaultTiming(), name="soak")
        bench.start()
        try:
            duration = minutes * 60.0
            gw = bench.gateway
            eps = gw.endpoints
            assert eps is not None
            assert gw.pid is not None
            before = scrape(eps.http_url)
            fleet = LoadFleet(
                run_dir / "load" / "soak",
                bench.fleet_configs(duration + 60),
                python=ctx.python,
                repo_root=repo_root,
            )
            fleet.start()
            faults = _fault_cycle(bench)
            t0 = time.monotonic()
            next_fault = t0 + FAULT_EVERY_S / 2
            n = 0
            try:
                for _ in range(int(duration / SAMPLE_EVERY_S) + 1):
                    now = time.monotonic()
                    if now - t0 >= duration:
                        break
                    snap = snapshot(gw.pid)
                    samples.append(
                        Sample(
                            round(now - t0, 1),
                            snap.rss_bytes,
                            snap.num_fds,
                            snap.num_connections,
                            snap.num_threads,
                        )
                    )
                    if now >= next_fault:
                        name, inject, restore = faults[n % len(faults)]
                        n += 1
                        injected.append(name)
                        inject()
                        time.sleep(FAULT_HOLD_S)
                        restore()
                        next_fault = time.monotonic() + FAULT_EVERY_S
                    time.sleep(SAMPLE_EVERY_S)
            finally:
                fleet_result = fleet.stop(timeout_s=30)
            evidence = summarize(before, scrape(eps.http_url), EVIDENCE)
        finally:
            bench.stop()
    finally:
        stop_environment(ctx)
    result.requests = fleet_result.requests
    result.client_errors = fleet_result.errors
    result.expired_served = fleet_result.expired
    result.below_floor_served = fleet_result.below_floor
    ctx.scanner.add_planted(fleet_result.planted)
    problems, flat = flatness(samples)
    result.leaks = problems
    result.notes.append("faults: " + ", ".join(injected))
    result.notes.append(", ".join(f"{k}={v:.0f}" for k, v in evidence.items()))
    if fleet_result.errors_by_kind:
        result.notes.append(
            "errors: "
            + ", ".join(f"{k}={v}" for k, v in sorted(fleet_result.errors_by_kind.items()))
        )
    report.faults = [result]
    report.extra["soak"] = {
        "flatness": flat,
        "samples": [s.__dict__ for s in samples],
        "min_remaining_served_s": fleet_result.min_remaining_s,
    }
    files, findings = ctx.scanner.scan_paths(
        [p for p in (run_dir / "gateways", run_dir / "load") if p.exists()]
    )
    report.log_files_scanned = files
    report.secrets_found = len(findings)
    report.secret_findings = [f.describe() for f in findings[:100]]
    report.duration_s = time.monotonic() - started
    return report


FaultStep = tuple[str, Callable[[], None], Callable[[], None]]


def _fault_cycle(bench: FaultBench) -> list[FaultStep]:
    ctx, proxy = bench.ctx, bench.proxy

    def restart(name: str) -> Callable[[], None]:
        def _r() -> None:
            ctx.restart_component(name)
            if name == "catalog":
                bench.apply_lifetime()

        return _r

    def kill(name: str) -> Callable[[], None]:
        return lambda: ctx.kill_component(name)

    def mode(m: ProxyMode, latency_s: float = 0.0) -> Callable[[], None]:
        return lambda: proxy.set_mode(m, latency_s)

    return [
        ("kill9_catalog", kill("catalog"), restart("catalog")),
        ("net_reset", mode(ProxyMode.RESET), mode(ProxyMode.PASS)),
        ("kill9_idp", kill("idp"), restart("idp")),
        ("net_blackhole", mode(ProxyMode.BLACKHOLE), mode(ProxyMode.PASS)),
        ("kill9_seaweedfs", kill("s3"), restart("s3")),
        ("net_latency_1s", mode(ProxyMode.LATENCY, 1.0), mode(ProxyMode.PASS)),
    ]
