"""Orchestrates the hostile-input fuzzers against real gateways on the stack."""

from __future__ import annotations

from devstack.gateway_process import GatewayProcess
from hardening.environment import HarnessContext, ensure_tables, gateway_settings, native_path
from hardening.hostile import run_grpc_fuzz, run_rate_limit, run_schemathesis, run_socket_attacks
from hardening.isolation import NS_A, TABLE_A, prepare_catalog, rate_limit_gateway
from hardening.leaks import LeakBudget, settle, snapshot
from hardening.processes import HarnessError
from hardening.report import FuzzResult
from hardening.structural import Target
from hardening.structural_suite import run_structural_suite


def run_hostile_suite(ctx: HarnessContext, fuzz: FuzzResult, *, quick: bool = False) -> None:
    """Schemathesis, gRPC garbage, the structural corpus, slowloris/floods on one gateway; the
    rate limit on another."""
    gw_dir = ctx.run_dir / "gateways" / "hostile"
    env = gateway_settings(ctx, UPSTREAM__TIMEOUT_S="5", UPSTREAM__DEADLINE_S="10")
    gw = GatewayProcess(gw_dir, env, repo_root=ctx.repo_root, name="hostile", python=ctx.python)
    eps = gw.start(ready=False)
    try:
        if gw.wait_ready(60) is None:
            raise HarnessError("hostile gateway never became ready")
        ensure_tables(eps.http_url, ctx.warehouse, ctx.namespace, ["hx_t0"])
        assert gw.pid is not None
        baseline = snapshot(gw.pid)
        run_schemathesis(eps.http_url, token=None, max_examples=15 if quick else 60).into(
            fuzz, "schemathesis_openapi"
        )
        run_grpc_fuzz(eps.grpc_target, token=None, cases=100 if quick else 600).into(
            fuzz, "grpc_malformed"
        )
        names = Target(ctx.warehouse, "\x1f".join(ctx.namespace), "hx_t0")
        run_structural_suite(
            eps.http_url, eps.grpc_target, gw.log_dir, names, fuzz, quick=quick
        )
        log_lines_before = _error_lines(gw)
        run_socket_attacks(
            eps.http_url,
            eps.http_uds,
            slow_conns=30 if quick else 100,
            hold_s=4 if quick else 10,
            flood_conns=200 if quick else 1000,
        ).into(fuzz, "slowloris_and_flood")
        # Log amplification: ERROR lines the daemon wrote per attacking connection.
        fuzz.by_suite["slowloris_and_flood"]["error_log_lines"] = (
            _error_lines(gw) - log_lines_before
        )
        if gw.pid is None or not _alive(gw.pid):
            fuzz.crashes += 1
            fuzz.failures.append("hostile gateway died during fuzzing")
        else:
            _, problems = settle(
                gw.pid, baseline, LeakBudget(fds=32, connections=16, threads=8), timeout_s=30
            )
            fuzz.by_suite["leaks_after_fuzz"] = {
                "cases": 0,
                "server_errors": 0,
                "problems": problems,
            }
            fuzz.failures.extend(f"leak after fuzzing: {p}" for p in problems)
    finally:
        gw.stop()

    prepare_catalog(ctx)
    rl, tokens, _ = rate_limit_gateway(ctx, rate_per_s=20, burst=20)
    try:
        assert rl.endpoints is not None
        path = native_path(ctx.warehouse, [NS_A], TABLE_A, "/credentials")
        tally, stats = run_rate_limit(
            rl.endpoints.http_url,
            path,
            noisy_token=tokens["carol"],
            quiet_token=tokens["dave"],
            burst=20,
        )
        tally.into(fuzz, "per_caller_rate_limit")
        fuzz.by_suite["per_caller_rate_limit"].update(stats)
    finally:
        rl.stop()


def _error_lines(gw: GatewayProcess) -> int:
    """ERROR-level lines across the gateway's log files so far."""
    count = 0
    for path in gw.log_dir.glob("*.log"):
        with path.open(errors="replace") as fh:
            count += sum(1 for line in fh if '"level": "ERROR"' in line)
    return count


def _alive(pid: int) -> bool:
    import psutil

    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False
