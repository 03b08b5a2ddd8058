"""The hardening report: `summary.json` (machine-readable) and `report.md` (for people).

The summary keys `faults[].{name, client_errors, expired_served, recovery_s}`, `fuzz.cases`,
`fuzz.server_errors`, `isolation.cases`, `isolation.leaks` and `secrets_found` are a contract
(the issue names them); everything else is extra detail.
"""

from __future__ import annotations

import json
import platform
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any


@dataclass
class FaultResult:
    """Outcome of one injected fault under steady client load."""

    name: str
    client_errors: int = 0
    expired_served: int = 0
    below_floor_served: int = 0
    requests: int = 0
    recovery_s: float | None = None
    leaks: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    error: str | None = None


@dataclass
class FuzzResult:
    """Hostile-input totals across all fuzzers, with a per-fuzzer breakdown."""

    cases: int = 0
    server_errors: int = 0
    crashes: int = 0
    by_suite: dict[str, dict[str, Any]] = field(default_factory=dict)
    failures: list[str] = field(default_factory=list)

    def add(self, suite: str, cases: int, server_errors: int, **extra: Any) -> None:
        self.cases += cases
        self.server_errors += server_errors
        self.by_suite[suite] = {"cases": cases, "server_errors": server_errors, **extra}


@dataclass
class IsolationResult:
    """Tenant isolation: every case is one (caller, surface, resource) probe."""

    cases: int = 0
    leaks: int = 0
    failures: list[str] = field(default_factory=list)
    by_surface: dict[str, int] = field(default_factory=dict)
    by_status: dict[str, int] = field(default_factory=dict)
    # hardening/lockout.py: a victim's figures quiet and under a bad-token flood, per surface
    lockout: list[dict[str, Any]] = field(default_factory=list)
    # hardening/event_flood.py: a victim's figures quiet and under a change-event flood
    event_flood: list[dict[str, Any]] = field(default_factory=list)

    def lockout_measured(self, m: dict[str, Any]) -> None:
        """Keep one lockout measurement; a victim hurt by the flood is a failure."""
        self.lockout.append(m)
        if not m["ok"]:
            self.failures.append(
                f"[lockout:{m['surface']}] a neighbour's bad tokens hurt a valid caller: "
                f"quiet {m['quiet']}, flooded {m['flooded']}")

    def event_flood_measured(self, m: dict[str, Any]) -> None:
        """Keep one event-flood measurement; a victim hurt by the flood, or a gateway that
        neither refused the oversized events nor rate-limited the storm, is a failure."""
        self.event_flood.append(m)
        if not m["ok"]:
            self.failures.append(
                f"[event_flood] a change-event flood hurt a caller or was not bounded: quiet "
                f"{m['quiet']}, flooded {m['flooded']}, gateway counted {m['gateway_counted']}")

    def record(
        self, surface: str, leaked: bool, description: str, status: int | None = None
    ) -> None:
        self.cases += 1
        self.by_surface[surface] = self.by_surface.get(surface, 0) + 1
        if status is not None:
            self.by_status[str(status)] = self.by_status.get(str(status), 0) + 1
        if leaked:
            self.leaks += 1
            self.failures.append(f"[{surface}] {description}")


@dataclass
class HardeningReport:
    """Everything one `python -m hardening` run measured."""

    faults: list[FaultResult] = field(default_factory=list)
    fuzz: FuzzResult = field(default_factory=FuzzResult)
    isolation: IsolationResult = field(default_factory=IsolationResult)
    secrets_found: int = 0
    secret_findings: list[str] = field(default_factory=list)
    log_files_scanned: int = 0
    suites_skipped: dict[str, str] = field(default_factory=dict)
    started_at: str = field(default_factory=lambda: datetime.now(UTC).isoformat(timespec="seconds"))
    duration_s: float = 0.0
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def passed(self) -> bool:
        """True when no fault served an expired credential and nothing leaked or crashed."""
        return (
            all(
                f.expired_served == 0
                and f.below_floor_served == 0
                and not f.leaks
                and f.error is None
                for f in self.faults
            )
            and self.fuzz.server_errors == 0
            and self.fuzz.crashes == 0
            and not self.fuzz.failures
            and self.isolation.leaks == 0
            and not self.isolation.failures
            and self.secrets_found == 0
            and not self.suites_skipped
            and self.extra.get("writes", {}).get("violations", 0) == 0
        )

    def summary(self) -> dict[str, Any]:
        return {
            "passed": self.passed,
            "started_at": self.started_at,
            "duration_s": round(self.duration_s, 1),
            "host": {"python": platform.python_version(), "cpus": _cpu_count()},
            "faults": [asdict(f) for f in self.faults],
            "fuzz": asdict(self.fuzz),
            "isolation": asdict(self.isolation),
            "secrets_found": self.secrets_found,
            "secret_findings": self.secret_findings,
            "log_files_scanned": self.log_files_scanned,
            "suites_skipped": self.suites_skipped,
            **({"extra": self.extra} if self.extra else {}),
        }


def _cpu_count() -> int:
    import os

    return os.cpu_count() or 0


def render_markdown(report: HardeningReport) -> str:
    """Human-readable report with one table per suite."""
    lines = [
        "# Lakegate hardening report",
        "",
        f"Started {report.started_at}, took {report.duration_s:.0f} s. "
        f"Verdict: **{'PASS' if report.passed else 'FAIL'}**.",
        "",
        "## Faults (steady load from several client processes)",
        "",
        "| fault | requests | client errors | expired served | below floor | recovery (s) "
        "| leaks | notes |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for f in report.faults:
        recovery = "-" if f.recovery_s is None else f"{f.recovery_s:.1f}"
        notes = "; ".join(f.notes + ([f"ERROR: {f.error}"] if f.error else []))
        lines.append(
            f"| {f.name} | {f.requests} | {f.client_errors} | {f.expired_served} "
            f"| {f.below_floor_served} | {recovery} | {', '.join(f.leaks) or 'none'} | {notes} |"
        )
    soak = report.extra.get("soak")
    if soak is not None:
        flat = soak.get("flatness", {})
        lines += ["", "## Soak: memory and open fds (gateway process)", ""]
        lines += [f"- {k}: {v}" for k, v in flat.items()]
        lines.append(f"- samples: {len(soak.get('samples', []))}")
        lines.append(f"- min remaining served: {soak.get('min_remaining_served_s')}")
        lines += [
            "",
            f"{report.log_files_scanned} log files scanned, {report.secrets_found} secrets found.",
        ]
        return "\n".join(lines) + "\n"
    lines += [
        "",
        "## Hostile input",
        "",
        f"{report.fuzz.cases} cases, {report.fuzz.server_errors} server errors (5xx / INTERNAL), "
        f"{report.fuzz.crashes} crashes.",
        "",
        "| suite | cases | server errors | details |",
        "|---|---|---|---|",
    ]
    for suite, row in report.fuzz.by_suite.items():
        details = ", ".join(
            f"{k}={v}" for k, v in row.items() if k not in ("cases", "server_errors")
        )
        lines.append(f"| {suite} | {row['cases']} | {row['server_errors']} | {details} |")
    lines += _bullets("Hostile-input failures", report.fuzz.failures)
    lines += [
        "",
        "## Isolation",
        "",
        f"{report.isolation.cases} probes, {report.isolation.leaks} leaks. By surface: "
        + ", ".join(f"{k}={v}" for k, v in sorted(report.isolation.by_surface.items()))
        + ". Answers to forbidden requests by status: "
        + ", ".join(f"{k}={v}" for k, v in sorted(report.isolation.by_status.items())),
    ]
    for m in report.isolation.lockout:
        q, f = m["quiet"], m["flooded"]
        lines.append(
            f"- lockout {m['surface']}: victim p99 {q['p99_ms']} ms quiet, {f['p99_ms']} ms "
            f"under an attacker at {m['attacker']['per_s']} bad tokens/s "
            f"({m['attacker']['statuses']}); victim errors {q['errors']}/{q['requests']} quiet, "
            f"{f['errors']}/{f['requests']} flooded: {'ok' if m['ok'] else 'FAILED'}")
    for m in report.isolation.event_flood:
        q, f = m["quiet"], m["flooded"]
        lines.append(
            f"- event flood: victim p99 {q['p99_ms']} ms quiet, {m['control']['p99_ms']} ms "
            f"while {m['published_control']:,} events went to an unsubscribed subject "
            f"(control), {f['p99_ms']} ms while {m['published']:,} events were published "
            f"(gateway counted {m['gateway_counted']});"
            f" victim errors {q['errors']}/{q['requests']} quiet, {f['errors']}/{f['requests']}"
            f" flooded: {'ok' if m['ok'] else 'FAILED'}")
    lines += _bullets("Isolation failures", report.isolation.failures)
    if "writes" in report.extra:
        from hardening.write_matrix import render_write_suite

        lines += render_write_suite(report.extra["writes"])
    lines += [
        "",
        "## Secrets in logs",
        "",
        f"{report.log_files_scanned} log files scanned, {report.secrets_found} secrets found.",
    ]
    lines += _bullets("Findings (fingerprints only)", report.secret_findings)
    model = report.extra.get("model")
    if model is not None:
        lines += ["", "## Credential cache model (hypothesis, `harden` profile)", "",
                  f"{'passed' if model['passed'] else 'FAILED'} in {model['duration_s']} s."]
        if not model["passed"]:
            lines += ["", "```", *model["tail"], "```"]
    if report.suites_skipped:
        lines += _bullets("Skipped", [f"{k}: {v}" for k, v in report.suites_skipped.items()])
    return "\n".join(lines) + "\n"


def _bullets(title: str, items: list[str], limit: int = 50) -> list[str]:
    if not items:
        return []
    out = ["", f"### {title}", ""]
    out += [f"- {item}" for item in items[:limit]]
    if len(items) > limit:
        out.append(f"- ... and {len(items) - limit} more")
    return out


def write_report(report: HardeningReport, out_dir: Path) -> tuple[Path, Path]:
    """Write `summary.json` and `report.md` into `out_dir` (created if missing)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    summary_path = out_dir / "summary.json"
    report_path = out_dir / "report.md"
    summary_path.write_text(json.dumps(report.summary(), indent=2, sort_keys=False) + "\n")
    report_path.write_text(render_markdown(report))
    return report_path, summary_path
