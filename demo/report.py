"""The demo's closing report (tables, the per-node picture, what the gateways saved) and the JSON
summary written by ``--summary-json``. Every number comes from the run or from a counter read
from a gateway, the catalog or the IdP."""

from __future__ import annotations

from typing import Any

from demo.duckdb_query import DuckDBResult
from demo.metrics import Counters, NodeCounters
from demo.pipeline import PipelineRun
from devstack.stack_info import StackInfo

ACCESS_MODES = 2  # read and write: the most credentials one table can need from the catalog


def render(
    run: PipelineRun,
    counters: Counters,
    info: StackInfo,
    elapsed_s: float,
    *,
    master: str = "",
    executors: dict[str, int] | None = None,
    kept_running: bool = False,
    duckdb: DuckDBResult | None = None,
    storage: str = "s3",
) -> str:
    """A plain-text report (fits one screen) of a run on ``storage`` (``s3``, ``adls``, ``gcs``)."""
    lines = [
        "",
        f"Lakegate demo: OK in {elapsed_s:.0f} s" + (f" on {master}" if master else ""),
        "",
        f"Tables (warehouse {info.warehouse_for(storage).name!r})",
        f"  {'table':<28} {'format':<8} {'rows written':>12} {'rows read':>10} {'tasks':>6}",
    ]
    for t in run.tables:
        lines.append(
            f"  {t.name:<28} {t.format:<8} {t.rows_written:>12,} {t.rows_read:>10,}"
            f" {t.write_tasks + t.read_tasks:>6}"
        )
    bound = len(run.tables) * ACCESS_MODES
    lines += ["", f"Nodes (each node's credential vends are bounded by tables x access"
              f" modes = {len(run.tables)} x {ACCESS_MODES} = {bound}, plus one per entry a table"
              " change invalidated; calls that vended nothing, by status, after a +)",
              f"  {'node':<8} {'executors':>9} {'requests served':>16} {'catalog calls':>14}"
              f" {'IdP logins':>11}  gateway"]
    for node in counters.nodes:
        count = (executors or {}).get(node.name, 0)
        lines.append(
            f"  {node.name:<8} {count:>9} {node.credential_requests:>16,}"
            f" {format_catalog_calls(node):>14} {node.idp_token_calls:>11}  {node.gateway}"
        )
    lines += _savings(run, counters, storage)
    if duckdb is not None:
        lines += _duckdb(duckdb)
    lines += [
        "",
        "Metrics" + (" (the stack is still running)" if kept_running else
                     " (live while the stack runs; `python -m demo --keep-running` keeps it up)"),
        "  gateways /metrics   lakegate_requests_total{kind=\"credential\"},"
        " lakegate_upstream_requests_total",
        f"  catalog  {info.catalog.url}/_emulator/stats",
        f"  IdP      {info.idp.issuer}/_idp/stats",
    ]
    if kept_running:
        lines.append(f"  logs     {info.run_dir}")
    return "\n".join(lines)


# What the catalog mints per vend (the emulator counts each as `sts_assume_role`).
_MINTS = {
    "s3": "STS AssumeRole calls made by the catalog",
    "adls": "SAS tokens signed by the catalog",
    "gcs": "GCS tokens minted by the catalog",
}


def _savings(run: PipelineRun, counters: Counters, storage: str = "s3") -> list[str]:
    served = counters.gateway_credential
    detail = ", ".join(f"{k} {v}" for k, v in sorted(served.items()) if v)
    notes = _served_notes(served)
    tasks = run.tasks
    upstream = counters.upstream_credential_calls
    tokens = counters.idp_token_requests
    sts = counters.catalog.get("sts_assume_role", 0)
    return [
        "",
        "Credentials (since the stack started)",
        f"  Spark tasks that read or wrote table data   {tasks:>6}",
        f"  credential requests served by the gateways  {counters.gateway_credential_total:>6}"
        f"   ({detail or 'none'})",
        *notes,
        f"  catalog credential calls (catalog's count)  {upstream:>6}",
        f"  {_MINTS.get(storage, _MINTS['s3']):<44}{sts:>6}",
        f"  IdP token requests (IdP's count)            {tokens:>6}",
        f"  Savings: {tasks} task credential needs -> {upstream} upstream catalog calls and"
        f" {tokens} IdP logins,",
        f"  where executors alone would make ~{tasks} IdP logins and ~{tasks} catalog calls",
        f"  ({_saving(tasks, upstream)} fewer catalog calls, {_saving(tasks, tokens)} fewer"
        " logins).",
        "  Tasks in one Python worker share the client's per-process memo, so repeats never even",
        "  reach the gateway.",
    ]


_NOTES = {
    "not_found": "not_found: a writer asked for a table before creating it (the catalog's"
                 " 404; pyiceberg loads before it creates): not a fault",
    "denied": "denied: a caller the policy or authentication refused",
    "error": "error: a request that failed (bad input, a catalog error other than 404);"
             " each gateway's /metrics names its surface and kind",
}


def _served_notes(served: dict[str, int]) -> list[str]:
    """One line for each result beside the cache outcomes, so every number is explained."""
    return [f"    {_NOTES[k]}" for k in sorted(_NOTES) if served.get(k)]


def _duckdb(result: DuckDBResult) -> list[str]:
    counted = ", ".join(f"{name.rsplit('.', 1)[-1]} {n:,}" for name, n in result.rows.items())
    return [
        "",
        f"DuckDB (one query over the {len(result.rows)} tables, through node {result.node}'s"
        " gateway)",
        f"  rows counted   {counted}",
        f"  credential requests served by node {result.node}'s gateway  "
        f"{result.gateway_credential_requests:>4}",
        "  catalog credential calls caused by the query       "
        f"{result.catalog_credential_calls:>4}",
    ]


def format_catalog_calls(node: NodeCounters) -> str:
    """`10`, or `10 +404x1` when some calls vended nothing (a table not created yet, a retry)."""
    by_status = node.upstream_credential_by_status
    others = " ".join(f"{status}x{n}" for status, n in sorted(by_status.items()) if status != "200")
    vended = by_status.get("200", 0) if by_status else node.upstream_credential_calls
    cell = f"{vended} +{others}" if others else str(vended)
    return f"{cell} ({node.invalidated} inv.)" if node.invalidated else cell


def summary(
    run: PipelineRun,
    counters: Counters,
    master: str,
    executors: dict[str, int] | None = None,
    duckdb: DuckDBResult | None = None,
) -> dict[str, Any]:
    """The ``--summary-json`` document."""
    return {
        "spark_master": master,
        "nodes": [
            {
                "name": n.name,
                "gateway": n.gateway,
                "executors": (executors or {}).get(n.name, 0),
                "credential_requests": n.credential_requests,
                "upstream_credential_calls": n.upstream_credential_calls,
                "upstream_credential_by_status": n.upstream_credential_by_status,
                "invalidated": n.invalidated,
            }
            for n in counters.nodes
        ],
        "tables": [
            {"name": t.name, "format": t.format, "rows_written": t.rows_written,
             "rows_read": t.rows_read}
            for t in run.tables
        ],
        "tasks": run.tasks,
        "catalog_credential_calls": counters.upstream_credential_calls,
        "idp_token_requests": counters.idp_token_requests,
        "duckdb": None if duckdb is None else {
            "node": duckdb.node,
            "rows": duckdb.rows,
            "gateway_credential_requests": duckdb.gateway_credential_requests,
            "catalog_credential_calls": duckdb.catalog_credential_calls,
        },
    }


def _saving(tasks: int, upstream: int) -> str:
    if tasks <= 0:
        return "n/a"
    return f"{max(0.0, 1 - upstream / tasks):.0%}"
