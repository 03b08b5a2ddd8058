"""Turns a bench summary into `summary.json`, `report.md` and PNG plots in one directory.

Pure with respect to its input: `write_report(summary, out_dir)` works from a fixture JSON as
well as from a live run (the unit tests do the former).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from loadtest.targets import TargetCheck, evaluate, herd_bound_ms

SURFACES = ("http_tcp", "http_uds", "grpc_tcp", "grpc_uds", "aws")


def write_report(summary: Mapping[str, Any], out_dir: Path) -> list[TargetCheck]:
    """Write summary.json (with the target checks), report.md and the plots.

    Returns:
        The target checks, for the console summary.
    """
    out_dir.mkdir(parents=True, exist_ok=True)
    checks = evaluate(summary)
    doc = dict(summary)
    doc["targets"] = [c.__dict__ for c in checks]
    (out_dir / "summary.json").write_text(json.dumps(doc, indent=1, sort_keys=False) + "\n")
    plots = _plots(summary, out_dir)
    (out_dir / "report.md").write_text(render_markdown(summary, checks, plots))
    return checks


def console_summary(checks: list[TargetCheck]) -> str:
    lines = []
    for c in checks:
        mark = {True: "MET   ", False: "MISSED", None: "N/A   "}[c.met]
        lines.append(f"  {mark} {c.name}: {c.measured} (target {c.target})")
    return "\n".join(lines)


def render_markdown(summary: Mapping[str, Any], checks: list[TargetCheck], plots: list[str]) -> str:
    """The Markdown report: targets first, then one section per scenario."""
    meta = summary.get("meta", {})
    out = [
        "# Lakegate load test report",
        "",
        f"Profile `{meta.get('profile', '?')}`, {meta.get('started_at', '?')}, "
        f"total {meta.get('duration_s', '?')} s on {meta.get('cpu_count', '?')} CPUs. "
        f"{meta.get('pinning', '')}",
        "",
        "## Targets",
        "",
    ]
    verdict = {True: "met", False: "**MISSED**", None: "not measured"}
    out += _table(("target", "wanted", "measured", "verdict"),
                  ((c.name, c.target, c.measured, verdict[c.met]) for c in checks))
    missed = [c for c in checks if c.met is False]
    if missed:
        out += [
            "",
            "Missed targets, plainly: "
            + "; ".join(f"{c.name} measured {c.measured} against {c.target}" for c in missed)
            + ".",
        ]
    out += _herd_section(summary.get("cold_herd"))
    out += _surface_section(summary.get("surfaces"))
    out += _write_section(summary.get("writes"))
    out += _executor_section(summary.get("executors"))
    out += _scaling_section(summary.get("scaling"))
    out += _dict_section("4. Refresh soak (time-compressed)", summary.get("soak"))
    out += _dict_section("5. Outage", summary.get("outage"))
    out += _dict_section("6. Capacity", summary.get("capacity"))
    out += _dict_section("7. Remote signing (pyiceberg scans, sign latency, signatures/s)",
                         summary.get("signing"))
    if plots:
        out += ["", "## Plots", ""] + [f"![{p}]({p})" for p in plots]
    notes = list(meta.get("notes") or [])
    if meta.get("scenario_s"):
        notes.append(
            "Scenario durations (s): "
            + ", ".join(f"{k} {v}" for k, v in meta["scenario_s"].items())
        )
    if meta.get("loadavg_1m_after"):
        notes.append(
            "Machine load (1-minute load average, 2 CPUs) after each scenario: "
            + ", ".join(f"{k} {v}" for k, v in meta["loadavg_1m_after"].items())
            + ". Anything well above 2 means the servers and generators were starved by other "
            "work, which lowers every absolute figure and adds noise to the ratios."
        )
    if notes:
        out += ["", "## Notes", ""] + [f"- {n}" for n in notes]
    return "\n".join(out) + "\n"


def _table(header: Sequence[str], rows: Iterable[Sequence[Any]]) -> list[str]:
    """A Markdown table: the header, its separator, one line per row."""

    def line(cells: Sequence[Any]) -> str:
        return "| " + " | ".join(str(c) for c in cells) + " |"

    return [line(header), "|" + "---|" * len(header), *(line(r) for r in rows)]


def _head(title: str, data: Any) -> tuple[list[str], bool]:
    """A section's heading, and whether its data can be shown (if not, the heading says why)."""
    out = ["", f"## {title}", ""]
    if not data or _error(data):
        return out + (_error(data) or ["Not run."]), False
    return out, True


def _error(section: Any) -> list[str]:
    if isinstance(section, Mapping) and "error" in section:
        return ["", f"Scenario failed: `{section['error']}`"]
    return []


def _herd_section(herd: Any) -> list[str]:
    out, usable = _head("1. Cold herd", herd)
    if not usable:
        return out
    rows = []
    for k, r in herd.items():
        if not k.isdigit():
            continue
        if "error" in r:
            rows.append((f"{int(k):,}", "", f"failed: {r['error'][:120]}", "", "", "", "", "",
                         "", ""))
            continue
        lat = r.get("latency_ms", {})
        rows.append((f"{int(k):,}", r.get("repeats", 1), r["upstream_calls"],
                     r.get("upstream_ms"), lat.get("p50"), lat.get("p99"), r["p99_extra_ms"],
                     r.get("baseline_p99_ms"), herd_bound_ms(r), r.get("errors", 0)))
    out += [
        "Each K up to 1,000 is several herds (`herds`), each on a fresh table and followed by "
        "the trivial server's same burst: `p99 extra` and the trivial server's p99 are the "
        "medians over them, the latencies the median herd's, `upstream calls` 1 only if every "
        "herd made one.",
        "",
    ]
    out += _table(("K", "herds", "upstream calls", "upstream call ms", "p50 ms", "p99 ms",
                   "p99 extra ms", "trivial server p99 ms (same burst)", "bound ms",
                   "errors"), rows)
    profile = herd.get("profile")
    return out + (_profile_lines([(f"one more herd of K={profile.get('k')}", profile)])
                  if isinstance(profile, Mapping) else [])


def _surface_section(surfaces: Any) -> list[str]:
    out, usable = _head("2. Cached throughput and latency per surface", surfaces)
    if not usable:
        return out
    out += [
        "`ratio` = the median pair ratio of the surface's weakest concurrency (the targets "
        "use each concurrency's lower quartile, below); req/s columns are the best single runs. "
        "`per-core ratio` = the same with each side's best requests per second of server CPU "
        "actually used (other tenants of the "
        "machine decide how much CPU each server gets).",
        "",
    ]
    rows = []
    for name in SURFACES:
        s = surfaces.get(name)
        if not s:
            continue
        half = s.get("half_load", {})
        lat = half.get("latency_ms", {})
        rows.append((
            name, f"{s['rps']:,.0f}", f"{s['baseline_rps']:,.0f}", s["ratio"],
            s.get("cpu_normalized_ratio"),
            f"{lat.get('p50')} / {lat.get('p90')} / {lat.get('p99')} / {lat.get('p999')}",
            half.get("baseline_latency_ms_same_rate", {}).get("p99"),
        ))
    out += _table(("surface", "req/s (best)", "baseline req/s", "ratio", "per-core ratio",
                   "p50 / p90 / p99 / p99.9 ms at half load",
                   "baseline p99 ms at the same rate"), rows)
    for key, label in (("audit_per_request", "With one audit line per request "
                                              "(`LOG__AUDIT_INTERVAL_S=0`)"),
                       ("audit_off", "With the audit off (`LOG__AUDIT=false`)")):
        other = [(n, surfaces[n][key]) for n in SURFACES
                 if isinstance(surfaces.get(n), Mapping) and surfaces[n].get(key)]
        if other:
            figures = "; ".join(
                f"{n} {q['rps']:,.0f} req/s vs baseline {q['baseline_rps']:,.0f} = "
                f"{q['ratio']} x" + (f" (per server core {q['cpu_normalized_ratio']} x)"
                                     if q.get("cpu_normalized_ratio") is not None else "")
                for n, q in other)
            out += ["", f"{label}, same run: {figures}."]
    out += [
        "",
        "Per concurrency (closed loop): in each pair one loop alternates between the gateway and "
        "its trivial server every few tenths of a second; each pair's ratio is one sample; "
        "req/s and latencies are the median pair's.",
        "",
    ]
    by_concurrency = [
        (name, conc, _ratio_cell(r.get("ratio")), f"{r['rps']:,.0f}", f"{r['baseline_rps']:,.0f}",
         r["latency_ms"].get("p99"), r["baseline_latency_ms"].get("p99"),
         f"{r.get('server_cores')} / {r.get('baseline_server_cores')}",
         f"{r.get('client_cores')} / {r.get('baseline_client_cores')}")
        for name in SURFACES
        for conc, r in (surfaces.get(name) or {}).get("by_concurrency", {}).items()
    ]
    out += _table(("surface", "concurrency", "ratio median [q1-q3] (pairs)", "req/s",
                   "baseline req/s", "p99 ms",
                   "baseline p99 ms", "server cores (gw / base)",
                   "generator cores (gw / base)"), by_concurrency)
    return out + _profile_lines([(name, s[key]) for name in SURFACES
                                 for s in [surfaces.get(name)] if isinstance(s, Mapping)
                                 for key in ("profile", "profile_audit_per_request")
                                 if s.get(key)])


def _pair_rule(writes: Any) -> str:
    """How many pairs a cell ran for: the minimum, and more while a quick cell lasts."""
    least, most = writes.get("pairs"), writes.get("pairs_max")
    if not most or most == least:
        return f"up to {least}"
    return f"{least}, up to {most} while the cell has run under {writes.get('cell_s'):g} s,"


def _side_rule(writes: Any) -> str:
    """How a pair's two sides alternate (nothing to say of one write each)."""
    most = writes.get("side_max") or 1
    if most <= 1:
        return ""
    return (f"In a pair the two sides alternate (A B B A ...) until each has written "
            f"{writes.get('side_s'):g} s, at most {most} writes each, and each side's seconds "
            "are its median write. ")


def _write_section(writes: Any) -> list[str]:
    out, usable = _head("2b. Spark writes: the data source vs the same write made directly",
                        writes)
    if not usable:
        return out
    out += [
        f"{writes.get('rows'):,} rows per write; {_pair_rule(writes)} interleaved pair(s) per "
        "mode (each cell's count in parentheses: a cell past its share of the time budget runs "
        "no further pair). " + _side_rule(writes) + "`ratio` = data source seconds / direct "
        "seconds per pair "
        "(median [q1-q3]). `noop` "
        "= the same DataFrame to Spark's noop sink: the job's cost without any I/O. "
        "`plan / tasks / commit` (medians, from Spark's event log): the driver before the "
        "write's tasks start, the write stage, the driver after its last task (the data "
        "source's commit protocol; the direct write's publish).",
        "",
    ]
    rows = []
    for fmt, parts, mode, cell, m in _write_modes(writes):
        phases = m.get("phases") or {}
        rows.append((fmt, parts, mode, m.get("datasource_s"), m.get("direct_s"),
                     cell.get("noop_s"), _ratio_cell(m.get("ratio")),
                     _phases_cell(phases.get("datasource")),
                     _phases_cell(phases.get("direct"))))
    out += _table(("format", "partitions", "mode", "data source s", "direct s", "noop s",
                   "ratio median [q1-q3] (pairs)", "data source plan / tasks / commit s",
                   "direct plan / tasks / commit s"), rows)
    return out + _store_table(writes)


def _write_modes(writes: Mapping[str, Any]) -> Iterator[tuple[str, str, str, Mapping[str, Any],
                                                               Mapping[str, Any]]]:
    """Every cell's modes in the summary's order: format, partitions, mode, the cell, its
    mode's figures (``{}`` when missing)."""
    for key, cell in writes.items():
        if "@" not in key or not isinstance(cell, Mapping):
            continue
        fmt, parts = key.split("@", 1)
        for mode in ("append", "overwrite"):
            yield fmt, parts, mode, cell, cell.get(mode) or {}


STORE_TYPES = ("PUT", "POST", "GET", "HEAD", "LIST", "DELETE")


def _store_table(writes: Mapping[str, Any]) -> list[str]:
    """Each side's object-store requests per write, by type, from the store's own counters
    (``loadtest/store_requests.py``); nothing when no cell has them."""
    rows = []
    for fmt, parts, mode, _cell, m in _write_modes(writes):
        store = m.get("store") or {}
        for side in ("datasource", "direct"):
            tally = store.get(side)
            if isinstance(tally, Mapping):
                rows.append((fmt, parts, mode, "data source" if side == "datasource" else side,
                             *_store_cells(tally), tally.get("writes")))
    if not rows:
        return []
    intro = ("Object-store requests per write, by type, as the store counted them "
             "(SeaweedFS's `SeaweedFS_s3_request_total` and `_seconds`, scraped just before "
             "and after each timed write): `n (ms)` = requests and the store's own "
             "milliseconds spent on them, means over the cell's writes. The direct write's "
             "requests are the format library's own; what the data source adds is its "
             "protocol (intents, markers, ledger records, listings, completes). `POST` is "
             "CompleteMultipartUpload and DeleteObjects among others.")
    header = ("format", "partitions", "mode", "side", *STORE_TYPES, "other", "store ms",
              "writes")
    return ["", intro, "", *_table(header, rows)]


def _store_cells(tally: Mapping[str, Any]) -> list[str]:
    requests, ms = tally.get("requests") or {}, tally.get("server_ms") or {}
    cells = [f"{requests.get(t, 0):g} ({ms.get(t, 0.0):.1f})" if requests.get(t) else "0"
             for t in STORE_TYPES]
    other = {t: n for t, n in requests.items() if t not in STORE_TYPES}
    cells.append(", ".join(f"{t} {n:g}" for t, n in sorted(other.items())) or "-")
    cells.append(f"{sum(ms.values()):.1f}")
    return cells


def _phases_cell(phases: Any) -> str:
    if not isinstance(phases, Mapping) or not phases:
        return "-"
    return " / ".join(f"{phases.get(k, 0):.2f}" for k in ("plan", "tasks", "commit"))


def _ratio_cell(ratio: Any) -> str:
    if not isinstance(ratio, Mapping) or ratio.get("median") is None:
        return "-"
    return f"{ratio['median']:.2f} [{ratio['q1']:.2f}-{ratio['q3']:.2f}] ({ratio['pairs']})"


def _profile_lines(profiles: list[tuple[str, Any]]) -> list[str]:
    """The top self frames of py-spy profiles (`--profile`): (what was profiled, profile)."""
    if not profiles:
        return []
    out = ["", "Profiles (py-spy on the gateway process; share of samples; raw stacks in the "
           "`profile-*.txt` files):", ""]
    for name, prof in profiles:
        if "error" in prof:
            out.append(f"- {name}: not profiled ({prof['error']})")
            continue
        top = ", ".join(f"{frame} {pct}%" for frame, pct in prof["self_pct"][:8])
        rate = f" at {prof['rps']:,.0f} req/s" if prof.get("rps") else ""
        out.append(f"- `{prof['file']}` ({name}, {prof['samples']} samples{rate}): self: {top}")
    return out


def _executor_section(ex: Any) -> list[str]:
    out, usable = _head("3. Executors: gateway vs direct vs direct_memo", ex)
    if not usable:
        return out
    out += [
        f"Setup: {json.dumps(ex.get('setup', {}))}",
        "",
        "`direct_memo` is the strongest baseline without a gateway: each executor its own "
        "pylakekeeper-style client with its own token and a memo of each table's credential "
        "until the serve floor. The headline column is upstream credential calls per table per "
        "credential lifetime.",
        "",
    ]
    rows = [
        (mode, f"{r['client_requests']:,}", f"{r['upstream_calls']:,}",
         r.get("credential_calls"), r.get("identity_loads", "-"),
         r.get("credential_calls_per_table_lifetime"), f"{r['idp_requests']:,}",
         r.get("sts_calls"), r.get("errors"), r.get("rps"), r.get("latency_ms", {}).get("p99"))
        for mode in ("gateway", "direct", "direct_memo")
        if (r := ex.get(mode))
    ]
    out += _table(("mode", "client requests", "upstream catalog calls", "credential calls",
                   "identity loads", "credential calls per table per lifetime",
                   "IdP token requests", "STS calls", "errors", "req/s", "p99 ms"), rows)
    out += [
        "",
        f"Amplification (client requests / upstream calls): gateway "
        f"**{ex['amplification']:,} x**, direct {ex.get('direct_amplification')} x. "
        f"Upstream credential calls, direct_memo / gateway: "
        f"**{ex.get('reduction_vs_direct_memo')} x**.",
    ]
    return out


def _scaling_section(rows: Any) -> list[str]:
    out, usable = _head("3b. Scaling: nodes x executors per node", rows)
    if not usable:
        return out
    out += [
        "Warm caches, uniform popularity, time-compressed lifetime; `per node, table, lifetime` "
        "= upstream credential calls / (nodes x tables x lifetimes in the window). `identity "
        "checks` = the metadata loads (no STS call) of the gateways' table identity re-checks, "
        "at most one per node and table per `CACHE__IDENTITY_TTL_S`; `per node, table, hour` "
        "scales them to an hour.",
        "",
    ]
    return out + _table(
        ("mode", "nodes", "executors per node", "credential calls", "per node, table, lifetime",
         "identity checks", "per node, table, hour", "IdP requests", "errors", "client requests"),
        ((r.get("mode"), r["nodes"], f"{r['executors_per_node']:,}", r.get("credential_calls"),
          r["upstream_per_node_table_lifetime"], r.get("identity_checks", ""),
          r.get("identity_checks_per_node_table_hour", ""), r["idp_requests"], r["errors"],
          f"{r.get('client_requests', 0):,}") for r in rows),
    )


def _dict_section(title: str, data: Any) -> list[str]:
    out, usable = _head(title, data)
    if not usable:
        return out
    return out + _table(
        ("measure", "value"),
        ((k, json.dumps(v) if isinstance(v, dict | list) else v) for k, v in data.items()),
    )


def _plots(summary: Mapping[str, Any], out_dir: Path) -> list[str]:
    """Draw the PNGs the data allows; returns their file names."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    made: list[str] = []
    surfaces = summary.get("surfaces") or {}
    names = [n for n in SURFACES if isinstance(surfaces.get(n), Mapping)]
    if names:
        fig, ax = plt.subplots(figsize=(8, 4.5))
        for name in names:
            by = surfaces[name].get("by_concurrency", {})
            concs = sorted(by, key=int)
            (line,) = ax.plot(
                [int(c) for c in concs],
                [by[c]["rps"] for c in concs],
                marker="o",
                label=f"gateway {name}",
            )
            ax.plot(
                [int(c) for c in concs],
                [by[c]["baseline_rps"] for c in concs],
                linestyle="--",
                marker="x",
                color=line.get_color(),  # same colour: one surface, gateway vs its baseline
                label=f"baseline {name}",
            )
        ax.set_xscale("log", base=2)
        ax.set_xlabel("concurrency (closed loop)")
        ax.set_ylabel("requests/s")
        ax.set_title("Cached credential throughput by surface")
        ax.legend(fontsize=7, ncol=2)
        _save(fig, out_dir / "throughput.png", made)
        fig, ax = plt.subplots(figsize=(8, 4.5))
        qs = ("p50", "p90", "p99", "p999")
        width = 0.8 / len(names)
        for i, name in enumerate(names):
            lat = surfaces[name].get("half_load", {}).get("latency_ms", {})
            ax.bar(
                [j + i * width for j in range(len(qs))],
                [lat.get(q) or 0 for q in qs],
                width=width,
                label=name,
            )
        ax.set_xticks([j + 0.4 - width / 2 for j in range(len(qs))], list(qs))
        ax.set_ylabel("ms")
        ax.set_title("Latency percentiles at half capacity (open loop)")
        ax.legend(fontsize=8)
        _save(fig, out_dir / "latency.png", made)
    ex = summary.get("executors") or {}
    if "gateway" in ex and "direct" in ex:
        fig, ax = plt.subplots(figsize=(8, 4.5))
        fields = ("client_requests", "upstream_calls", "idp_requests", "sts_calls")
        for i, mode in enumerate(("gateway", "direct")):
            ax.bar(
                [j + i * 0.4 for j in range(len(fields))],
                [max(1, ex[mode].get(f) or 0) for f in fields],
                width=0.4,
                label=mode,
            )
        ax.set_yscale("log")
        ax.set_xticks([j + 0.2 for j in range(len(fields))], list(fields))
        ax.set_title(
            f"Executors: amplification gateway {ex['amplification']:,} x vs direct "
            f"{ex.get('direct_amplification')} x"
        )
        ax.legend()
        _save(fig, out_dir / "amplification.png", made)
    rows = summary.get("scaling")
    if isinstance(rows, list) and rows:
        _scaling_plot(rows, out_dir, made)
    herd = summary.get("cold_herd") or {}
    ks = [k for k in herd if k.isdigit() and "latency_ms" in herd[k]]
    if ks:
        fig, ax = plt.subplots(figsize=(8, 4.5))
        ax.plot(
            [int(k) for k in ks],
            [herd[k]["latency_ms"]["p99"] for k in ks],
            marker="o",
            label="p99 latency",
        )
        ax.plot(
            [int(k) for k in ks],
            [herd[k]["p99_extra_ms"] for k in ks],
            marker="x",
            label="p99 extra over the upstream call",
        )
        ax.set_xscale("log")
        ax.set_xlabel("K concurrent requests for one uncached table")
        ax.set_ylabel("ms")
        ax.set_title("Cold herd")
        ax.legend()
        _save(fig, out_dir / "cold_herd.png", made)
    return made


def _scaling_plot(rows: list[Mapping[str, Any]], out_dir: Path, made: list[str]) -> None:
    """Upstream credential calls against executors per node: one line per gateway node count,
    one for direct_memo (a single node's executors without a gateway)."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 4.5))
    series: dict[str, list[Mapping[str, Any]]] = {}
    for r in rows:
        label = (f"gateway, {r['nodes']} node(s)" if r.get("mode") == "gateway"
                 else "direct_memo, 1 node")
        series.setdefault(label, []).append(r)
    for label, points in series.items():
        points = sorted(points, key=lambda r: r["executors_per_node"])
        ax.plot([r["executors_per_node"] for r in points],
                [max(1, r.get("credential_calls") or 0) for r in points],
                marker="x" if label.startswith("direct") else "o",
                linestyle="--" if label.startswith("direct") else "-", label=label)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("executors per node")
    ax.set_ylabel("upstream credential calls in the window")
    ax.set_title("Scaling: the gateway's upstream cost follows nodes x tables, not executors")
    ax.legend(fontsize=8)
    _save(fig, out_dir / "scaling.png", made)


def _save(fig: Any, path: Path, made: list[str]) -> None:
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    import matplotlib.pyplot as plt

    plt.close(fig)
    made.append(path.name)
