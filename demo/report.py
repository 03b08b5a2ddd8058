"""The demo's closing report: tables and rows, what the gateway saved, where the metrics are."""

from __future__ import annotations

from typing import Any

from demo.metrics import Counters
from demo.pipeline import PipelineRun


def render(run: PipelineRun, counters: Counters, info: dict[str, Any], elapsed_s: float) -> str:
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
    tasks = run.tasks
    lines += [
        "",
        "Credentials (since the stack started)",
        f"  Spark tasks that read or wrote storage      {tasks:>6}",
        f"  credential requests served by the gateway   {counters.gateway_credential_total:>6}"
        f"   ({detail or 'none'}; repeats in one worker are answered by the client's memo)",
        f"  upstream catalog credential calls           {upstream:>6}"
        f"   (+{loads} table loads, {sts} STS AssumeRole)",
        f"  IdP token requests                          {counters.idp_token_requests:>6}",
        f"  without a gateway: ~{tasks} token requests and ~{tasks} catalog credential calls"
        f" (one of each per task); saved {_saving(tasks, upstream)} of the catalog calls",
        "",
        "Metrics (live while the stack runs)",
        f"  gateway  {info['gateway']['http_url']}/metrics"
        "   lakegate_requests_total{kind=\"credential\"}, lakegate_upstream_requests_total",
        f"  catalog  {info['catalog']['url']}/_emulator/stats",
        f"  IdP      {info['idp']['issuer']}/_idp/stats",
        f"  logs     {info['run_dir']}",
    ]
    return "\n".join(lines)


def _saving(tasks: int, upstream: int) -> str:
    if tasks <= 0:
        return "n/a"
    return f"{max(0.0, 1 - upstream / tasks):.0%}"
