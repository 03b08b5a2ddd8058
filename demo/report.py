"""The demo's closing report: tables and rows, what the gateway saved, where the metrics are."""

from __future__ import annotations

from typing import Any

from demo.metrics import Counters
from demo.pipeline import PipelineRun


def render(
    run: PipelineRun,
    counters: Counters,
    info: dict[str, Any],
    elapsed_s: float,
    *,
    kept_running: bool = False,
) -> str:
    """A short plain-text report (fits one screen)."""
    lines = [
        "",
        f"Lakegate demo: OK in {elapsed_s:.0f} s",
        "",
        f"Tables (warehouse {info['warehouse']['name']!r})",
        f"  {'table':<28} {'format':<8} {'rows written':>12} {'rows read':>10} {'tasks':>6}",
    ]
    for t in run.tables:
        lines.append(
            f"  {t.name:<28} {t.format:<8} {t.rows_written:>12,} {t.rows_read:>10,}"
            f" {t.write_tasks + t.read_tasks:>6}"
        )
    served = counters.gateway_credential
    detail = ", ".join(f"{k} {v}" for k, v in sorted(served.items()) if v)
    upstream = counters.upstream_credential_calls
    loads = counters.catalog.get("load_generic_table", 0)
    sts = counters.catalog.get("sts_assume_role", 0)
    tokens = counters.idp_token_requests
    tasks = run.tasks
    lines += [
        "",
        "Credentials (since the stack started)",
        f"  Spark tasks that read or wrote table data    {tasks:>5}",
        f"  credential requests served by the gateway    {counters.gateway_credential_total:>5}"
        f"   ({detail or 'none'})",
        f"  upstream catalog credential calls            {upstream:>5}"
        f"   (per table and access mode, not per task; +{loads} metadata loads)",
        f"  STS AssumeRole calls made by the catalog     {sts:>5}",
        f"  IdP token requests                           {tokens:>5}",
        f"  Without a gateway each task logs in and asks the catalog itself: ~{tasks} token",
        f"  requests and ~{tasks} credential calls. Saved here: {max(0, tasks - tokens)} IdP and"
        f" {max(0, tasks - upstream)} catalog calls ({_saving(tasks, upstream)} of the"
        " catalog load).",
        "  Tasks in one Python worker share the client's per-process memo, so repeats never even",
        "  reach the gateway.",
        "",
        "Metrics" + (
            " (the stack is still running)" if kept_running
            else " (live while the stack runs; `python -m demo --keep-running` to browse them)"
        ),
        f"  gateway  {info['gateway']['http_url']}/metrics"
        "   lakegate_requests_total{kind=\"credential\"}, lakegate_upstream_requests_total",
        f"  catalog  {info['catalog']['url']}/_emulator/stats",
        f"  IdP      {info['idp']['issuer']}/_idp/stats",
    ]
    if kept_running:
        lines.append(f"  logs     {info['run_dir']}")
    return "\n".join(lines)


def _saving(tasks: int, upstream: int) -> str:
    if tasks <= 0:
        return "n/a"
    return f"{max(0.0, 1 - upstream / tasks):.0%}"
