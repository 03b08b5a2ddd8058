"""Fault suite: kill -9 / restart of every component and network faults, under steady load.

For each fault: client-visible errors (over all client processes), expired or below-floor
credentials served (must be 0), time to recover, and fds/sockets/threads of the gateway after
the fault settled compared with before it.

Recovery is measured end to end: after the fault is removed, a probe invalidates a dedicated
table and fetches it again (a real miss through IdP token, catalog and STS); recovery_s is the
later of "first successful probe" and "last client-visible error", from the moment of removal.

Lifetimes are shortened (the emulator advertises `credential_lifetime_s`) so the cache refreshes
every few tens of seconds and the faults hit refresh-ahead and stale-if-error, not just hits.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from devstack.gateway_process import GatewayProcess
from devstack.metrics_scrape import scrape, summarize
from devstack.metrics_scrape import total as metric_total
from devstack.processes import poll_until
from hardening.environment import (
    HarnessContext,
    ensure_tables,
    gateway_settings,
    native_path,
    request_json,
)
from hardening.fault_proxy import ProxyMode, ProxyThread
from hardening.leaks import LeakBudget, settle, snapshot
from hardening.load import LoadFleet
from hardening.loadclient import LoadConfig
from hardening.processes import HarnessError
from hardening.report import FaultResult

TABLES = ["hx_t0", "hx_t1", "hx_t2", "hx_t3"]
PROBE_TABLE = "hx_probe"
# Gateway-side evidence that a fault bit (counter growth over the scenario).
EVIDENCE = {
    "stale_serves": ("lakegate_requests_total", {"result": "stale"}),
    "refresh_errors": ("lakegate_refresh_total", {"status": "error"}),
    "refresh_ok": ("lakegate_refresh_total", {"status": "ok"}),
    "request_errors": ("lakegate_requests_total", {"result": "error"}),
}


@dataclass(frozen=True)
class FaultTiming:
    """Knobs shared by all scenarios (the soak reuses them with other values)."""

    # The emulator serves 50-100 % of the advertised lifetime (Lakekeeper's STC half-life), so
    # 150 s gives 75-150 s credentials, refreshed below ~60 s: a refresh every 15-90 s per key,
    # so a 20 s fault meets refreshes, while stale entries (>= ~50 s left) stay above the floor.
    lifetime_s: int = 150
    min_remaining_s: int = 15
    refresh_lead_s: int = 60
    warmup_s: float = 3.0
    hold_s: float = 20.0
    tail_s: float = 3.0
    recovery_timeout_s: float = 90.0


@dataclass(frozen=True)
class Scenario:
    """One fault: how to inject it and how to remove it."""

    name: str
    inject: Callable[[], None]
    restore: Callable[[], None]
    hold_s: float
    note: str = ""


class FaultBench:
    """A gateway behind the fault proxy, on the stack, with a probe and a client fleet."""

    def __init__(
        self, ctx: HarnessContext, timing: FaultTiming, name: str = "faults", clients: int = 4
    ) -> None:
        self.ctx = ctx
        self.timing = timing
        self.name = name
        self.clients = clients
        host, port = ctx.component_port("catalog")
        self.proxy = ProxyThread(host, port)
        self.gw: GatewayProcess | None = None
        # Wall-clock offset of the gateway process (see hardening/clockshim).
        self.clock_file = ctx.run_dir / "gateways" / name / "clock-offset"

    @property
    def gateway(self) -> GatewayProcess:
        assert self.gw is not None
        return self.gw

    def start(self) -> None:
        proxy_port = self.proxy.start()
        self.apply_lifetime()
        env = gateway_settings(
            self.ctx,
            upstream_url=f"http://127.0.0.1:{proxy_port}",
            CACHE__MIN_REMAINING_S=str(self.timing.min_remaining_s),
            CACHE__REFRESH_LEAD_S=str(self.timing.refresh_lead_s),
            UPSTREAM__TIMEOUT_S="3",
            UPSTREAM__DEADLINE_S="8",
            SHUTDOWN_GRACE_S="3",
            # Shorter than every outage below, so outages always outlast a name resolution
            # (the default 60 s makes the outcome depend on when the last resolution was).
            CACHE__WAREHOUSE_TTL_S="10",
        )
        self.clock_file.parent.mkdir(parents=True, exist_ok=True)
        self.set_clock_offset(0)
        env["HARDEN_CLOCK_OFFSET_FILE"] = str(self.clock_file)
        self.gw = GatewayProcess(
            self.ctx.run_dir / "gateways" / self.name,
            env,
            repo_root=self.ctx.repo_root,
            python=self.ctx.python,
            extra_pythonpath=(str(Path(__file__).resolve().parent / "clockshim"),),
        )
        eps = self.gw.start(ready=False)
        if self.gw.wait_ready(60) is None:
            raise HarnessError("gateway never became ready")
        ensure_tables(eps.http_url, self.ctx.warehouse, self.ctx.namespace, [*TABLES, PROBE_TABLE])

    def set_clock_offset(self, seconds: float) -> None:
        """Step the gateway's wall clock (monotonic time is untouched)."""
        tmp = self.clock_file.with_suffix(".tmp")
        tmp.write_text(f"{seconds}\n")
        tmp.replace(self.clock_file)  # atomic: the shim never reads a half-written number
        time.sleep(0.3)  # the shim re-reads at most every 0.2 s

    def apply_lifetime(self) -> None:
        if self.timing.lifetime_s:
            self.ctx.emulator_faults({"credential_lifetime_s": self.timing.lifetime_s})

    def stop(self) -> None:
        try:
            if self.gw is not None:
                self.gw.stop()
        finally:
            self.proxy.stop()
            if self._catalog_up():
                self.ctx.emulator_faults({"clear": True})

    def _catalog_up(self) -> bool:
        from devstack.readiness import port_open

        return port_open(*self.ctx.component_port("catalog"))

    def fleet_configs(self, duration_s: float) -> list[LoadConfig]:
        eps = self.gateway.endpoints
        assert eps is not None
        surfaces = ["http", "uds", "aws", "grpc"]
        # gRPC clients address the warehouse by UUID, the others by name: a fault that breaks
        # name resolution shows up on the name-addressed surfaces only.
        return [
            LoadConfig(
                surface=surfaces[i % len(surfaces)],
                warehouse=self.ctx.info.warehouse.id
                if surfaces[i % len(surfaces)] == "grpc"
                else self.ctx.warehouse,
                namespace=self.ctx.namespace,
                tables=TABLES,
                out="",
                http_url=eps.http_url,
                uds=eps.http_uds,
                grpc_target=eps.grpc_target,
                floor_s=self.timing.min_remaining_s,
                duration_s=duration_s,
                concurrency=2,
                pace_s=0.05,
                timeout_s=10.0,
            )
            for i in range(self.clients)
        ]

    def probe(self) -> tuple[bool, bool]:
        """Force a real miss on the probe table.

        Returns:
            (succeeded, served an expired or below-floor credential).
        """
        eps = self.gateway.endpoints
        assert eps is not None
        try:
            request_json(
                "POST",
                eps.http_url + "/v1/cache/invalidate",
                {
                    "warehouse": self.ctx.warehouse,
                    "namespace": self.ctx.namespace,
                    "table": PROBE_TABLE,
                },
                timeout_s=5,
            )
            status, body = request_json(
                "GET",
                eps.http_url
                + native_path(self.ctx.warehouse, self.ctx.namespace, PROBE_TABLE, "/credentials"),
                timeout_s=10,
            )
        except OSError:
            return False, False
        if status != 200 or not isinstance(body, dict):
            return False, False
        expires = body.get("expires_at_ms") or 0
        bad = bool(expires) and expires / 1000.0 - time.time() < self.timing.min_remaining_s - 2
        return True, bad


def run_scenario(bench: FaultBench, sc: Scenario, out_dir: Path) -> FaultResult:
    """Steady load, inject, hold, restore, measure recovery and leaks."""
    result = FaultResult(name=sc.name)
    if sc.note:
        result.notes.append(sc.note)
    t = bench.timing
    gw = bench.gateway
    assert gw.pid is not None
    baseline = snapshot(gw.pid)
    total = t.warmup_s + sc.hold_s + t.recovery_timeout_s + t.tail_s + 30
    fleet = LoadFleet(
        out_dir / sc.name,
        bench.fleet_configs(total),
        python=bench.ctx.python,
        repo_root=bench.ctx.repo_root,
    )
    eps = gw.endpoints
    assert eps is not None
    metrics_before = scrape(eps.http_url)
    fleet.start()
    restored_at: float | None = None
    probe_bad = 0
    probe_ok_at: list[float] = []
    try:
        time.sleep(t.warmup_s)
        sc.inject()
        injected_at = time.monotonic()
        time.sleep(1.0)
        # A forced miss during the fault shows whether the fault really cut the path.
        ok, _ = bench.probe()
        result.notes.append(f"miss during fault {'succeeded' if ok else 'failed'}")
        during = scrape(eps.http_url)
        result.notes.append("clock skew during fault: " + ", ".join(
            f"{c} {metric_total(during, 'lakegate_clock_skew_seconds', clock=c):+.0f}s"
            for c in ("catalog", "idp")))
        time.sleep(max(0.0, sc.hold_s - (time.monotonic() - injected_at)))
        sc.restore()
        restored_at = time.time()

        def probe_once() -> bool:
            nonlocal probe_bad
            ok, bad = bench.probe()
            probe_bad += int(bad)
            if ok:
                probe_ok_at.append(time.time())
            return ok

        poll_until(probe_once, timeout_s=t.recovery_timeout_s, interval_s=0.25)
        time.sleep(t.tail_s)
    except Exception as exc:  # noqa: BLE001 - the harness must still stop clients and report
        result.error = f"{type(exc).__name__}: {exc}"
    finally:
        fleet_result = fleet.stop()
    evidence = summarize(metrics_before, scrape(eps.http_url), EVIDENCE)
    result.notes.append(", ".join(f"{k}={v:.0f}" for k, v in evidence.items()))
    result.requests = fleet_result.requests
    result.client_errors = fleet_result.errors
    result.expired_served = fleet_result.expired
    result.below_floor_served = fleet_result.below_floor + probe_bad
    bench.ctx.scanner.add_planted(fleet_result.planted)
    if fleet_result.errors_by_kind:
        result.notes.append(
            "errors: "
            + ", ".join(f"{k}={v}" for k, v in sorted(fleet_result.errors_by_kind.items()))
        )
    if fleet_result.min_remaining_s is not None:
        claimed = fleet_result.min_remaining_claimed_s
        result.notes.append(
            f"min remaining served {fleet_result.min_remaining_s:.1f}s"
            + (f" (gateway said {claimed:.1f}s)" if claimed is not None else "")
        )
    if fleet_result.missing_results:
        result.error = result.error or f"{fleet_result.missing_results} client(s) wrote no result"
    if restored_at is not None:
        probe_recovery = None
        if probe_ok_at:
            probe_recovery = probe_ok_at[0] - restored_at
        last_err = fleet_result.last_error_after(restored_at)
        tail = (last_err - restored_at) if last_err else 0.0
        if probe_recovery is None:
            result.notes.append(f"probe never succeeded within {t.recovery_timeout_s:.0f}s")
        else:
            result.recovery_s = round(max(probe_recovery, tail), 2)
    if gw.pid is not None:
        _, problems = settle(gw.pid, baseline, LeakBudget())
        result.leaks = problems
    else:
        result.leaks = ["gateway not running after the fault"]
    return result


def scenarios(bench: FaultBench) -> list[Scenario]:
    """The fault list: process kills, then network faults between gateway and catalog."""
    ctx, gw, proxy, hold = bench.ctx, bench.gateway, bench.proxy, bench.timing.hold_s

    def kill(name: str) -> Callable[[], None]:
        return lambda: ctx.kill_component(name)

    def restart(name: str) -> Callable[[], None]:
        def _restart() -> None:
            ctx.restart_component(name)
            if name == "catalog":
                # The emulator's fault spec lives in memory; the short lifetime must come back.
                poll_until(lambda: _try(bench.apply_lifetime), timeout_s=15)

        return _restart

    def restart_gateway() -> None:
        gw.start(ready=False)

    return [
        Scenario(
            "baseline_no_fault", lambda: None, lambda: None, hold_s=hold / 2, note="control run"
        ),
        Scenario("kill9_idp", kill("idp"), restart("idp"), hold_s=hold),
        Scenario("kill9_catalog", kill("catalog"), restart("catalog"), hold_s=hold),
        Scenario("kill9_seaweedfs", kill("s3"), restart("s3"), hold_s=hold),
        Scenario(
            "kill9_gateway",
            gw.kill9,
            restart_gateway,
            hold_s=2.0,
            note="client errors expected while the gateway is down (cache is memory-only)",
        ),
        Scenario(
            "net_latency_1s",
            lambda: proxy.set_mode(ProxyMode.LATENCY, latency_s=1.0),
            lambda: proxy.set_mode(ProxyMode.PASS),
            hold_s=hold,
        ),
        Scenario(
            "net_reset",
            lambda: proxy.set_mode(ProxyMode.RESET),
            lambda: proxy.set_mode(ProxyMode.PASS),
            hold_s=hold,
        ),
        Scenario(
            "net_blackhole",
            lambda: proxy.set_mode(ProxyMode.BLACKHOLE),
            lambda: proxy.set_mode(ProxyMode.PASS),
            hold_s=hold + 2,
        ),
        Scenario(
            "clock_jump_back_1h",
            lambda: bench.set_clock_offset(-3600),
            lambda: bench.set_clock_offset(0),
            hold_s=hold,
            note="gateway wall clock -1h, monotonic unchanged",
        ),
        Scenario(
            "clock_jump_forward_1h",
            lambda: bench.set_clock_offset(3600),
            lambda: bench.set_clock_offset(0),
            hold_s=hold,
            note="gateway wall clock +1h, monotonic unchanged (outvoted by the catalog and IdP "
            "Dates)",
        ),
        *(
            Scenario(
                name,
                lambda offset=offset: proxy.set_mode(ProxyMode.DATE_SKEW, date_offset_s=offset),
                lambda: proxy.set_mode(ProxyMode.PASS),
                hold_s=hold,
                note=f"catalog Date {offset:+d} s (the proxy rewrites it), local and IdP clocks "
                "right",
            )
            for name, offset in (
                ("catalog_date_behind_120s", -120),
                ("catalog_date_behind_600s", -600),
                ("catalog_date_ahead_600s", 600),
            )
        ),
    ]


def _try(fn: Callable[[], None]) -> bool:
    try:
        fn()
    except (HarnessError, OSError):
        return False
    return True


def run_fault_suite(
    ctx: HarnessContext, timing: FaultTiming = FaultTiming(), only: set[str] | None = None
) -> list[FaultResult]:
    """Run every scenario on one gateway; a scenario that breaks the harness is reported,
    not fatal."""
    bench = FaultBench(ctx, timing)
    results: list[FaultResult] = []
    bench.start()
    try:
        for sc in scenarios(bench):
            if only and sc.name not in only:
                continue
            if bench.gateway.pid is None:
                bench.gateway.start(ready=False)
            results.append(run_scenario(bench, sc, ctx.run_dir / "load"))
    finally:
        bench.stop()
    return results
