"""`python -m loadtest --standard` (what `make bench` runs): start a private local stack, run
the scenarios, write `loadtest/results/latest/{summary.json,report.md,*.png}` and print the
summary. `--quick` runs a smaller profile; `--only a,b` runs some scenarios; `--write-formats`,
`--write-partitions` and `--write-pairs` run only some cells of the writes scenario; `--report
FILE` re-renders a report from an existing summary.json.

Every server the bench starts is stopped by its pid on the way out, including on errors,
Ctrl-C and SIGTERM (which unwinds like Ctrl-C: exit code 130). A scenario that fails is
recorded as `{"error": ...}` and the others still run.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import resource
import shutil
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from devstack.processes import EXIT_INTERRUPTED, sigterm_interrupts
from loadtest.context import BenchContext
from loadtest.profile import QUICK, STANDARD, Profile
from loadtest.profiler import py_spy
from loadtest.report import console_summary, write_report
from loadtest.stack import BenchStack

SCENARIOS = ("cold_herd", "surfaces", "writes", "executors", "scaling", "soak", "outage",
             "capacity", "signing")
DEFAULT_OUT = Path(__file__).resolve().parent / "results" / "latest"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m loadtest", description=__doc__)
    parser.add_argument("--standard", action="store_true", help="the make-bench profile")
    parser.add_argument("--quick", action="store_true", help="a smaller smoke profile")
    parser.add_argument("--only", default="", help="comma-separated scenarios to run")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    parser.add_argument("--no-pin", action="store_true", help="do not pin servers/generators")
    parser.add_argument("--report", type=Path, help="re-render from this summary.json")
    parser.add_argument("--profile", action="store_true",
                        help="also sample the gateway's hit path per surface with py-spy")
    parser.add_argument("--write-formats", default="",
                        help="writes scenario: comma-separated formats (default: all four)")
    parser.add_argument("--write-partitions", default="",
                        help="writes scenario: comma-separated partition counts")
    parser.add_argument("--write-pairs", type=int,
                        help="writes scenario: pairs per cell (exactly; default: the "
                             "profile's 3, up to 9 for a cell that runs quickly)")
    args = parser.parse_args(argv)
    if args.report:
        checks = write_report(json.loads(args.report.read_text()), args.out)
        print(console_summary(checks))
        return 0
    profile = QUICK if args.quick else STANDARD
    try:
        profile = write_cells(profile, args.write_formats, args.write_partitions,
                              args.write_pairs)
    except ValueError as exc:
        parser.error(str(exc))
    names = [n for n in args.only.split(",") if n] or list(SCENARIOS)
    unknown = set(names) - set(SCENARIOS)
    if unknown:
        parser.error(f"unknown scenarios: {sorted(unknown)}")
    if args.profile and py_spy() is None:
        parser.error("--profile needs py-spy (requirements/dev.txt; `make venv`)")
    try:
        with sigterm_interrupts():  # the stack, gateways and trivial servers stop by pid
            return run_bench(profile=profile, names=names, out_dir=args.out,
                             pin=not args.no_pin, sample=args.profile)
    except KeyboardInterrupt:
        print("\nbench interrupted; everything it started was stopped", file=sys.stderr)
        return EXIT_INTERRUPTED


def write_cells(profile: Profile, formats: str, partitions: str, pairs: int | None) -> Profile:
    """``profile`` with the writes scenario narrowed to some formats, partition counts and
    pairs (empty / None: the profile's own), so one cell can be re-measured alone."""
    chosen = tuple(f for f in formats.split(",") if f) or profile.write_formats
    unknown = set(chosen) - set(STANDARD.write_formats)
    if unknown:
        raise ValueError(f"unknown write formats: {sorted(unknown)}")
    try:
        parts = tuple(int(p) for p in partitions.split(",") if p) or profile.write_partitions
    except ValueError:
        raise ValueError(f"--write-partitions takes integers, not {partitions!r}") from None
    if min(parts) < 1 or (pairs is not None and pairs < 1):
        raise ValueError("partition counts and pairs must be at least 1")
    if pairs is None:
        return dataclasses.replace(profile, write_formats=chosen, write_partitions=parts)
    return dataclasses.replace(profile, write_formats=chosen, write_partitions=parts,
                               write_pairs=pairs, write_pairs_max=pairs)


def cpu_plan(pin: bool) -> tuple[set[int] | None, tuple[int, ...] | None, str]:
    """Servers on the first CPU, generators on the others (when there are >= 2)."""
    cpus = sorted(os.sched_getaffinity(0))
    if not pin or len(cpus) < 2:
        return None, None, "Servers and load generators were not pinned (they share all CPUs)."
    server, clients = {cpus[0]}, tuple(cpus[1:])
    return (
        server,
        clients,
        (
            f"Servers (gateway, baselines) pinned to CPU {cpus[0]}, load "
            f"generators to CPU(s) {list(clients)} with sched_setaffinity; "
            "other processes on the machine were not controlled."
        ),
    )


def run_bench(profile: Profile, names: list[str], out_dir: Path, pin: bool,
              sample: bool = False) -> int:
    """Run the chosen scenarios on a private stack and write the report. Returns exit code.

    With `sample`, the surfaces scenario also writes py-spy profiles into `out_dir`.
    """
    from loadtest.scenarios import (
        capacity,
        cold_herd,
        executors,
        outage,
        scaling,
        signing,
        soak,
        surfaces,
        writes,
    )

    runners: dict[str, Callable[[BenchContext], Any]] = {
        "cold_herd": cold_herd.run,
        "surfaces": surfaces.run,
        "writes": writes.run,
        "executors": executors.run,
        "scaling": scaling.run,
        "soak": soak.run,
        "outage": outage.run,
        "capacity": capacity.run,
        "signing": signing.run,
    }
    _raise_fd_limit()
    server_cpus, client_cpus, pinning = cpu_plan(pin)
    work = Path(tempfile.mkdtemp(prefix="lakegate-bench-"))
    stack = BenchStack(work / "stack", server_cpus)
    ctx = BenchContext(
        stack=stack,
        profile=profile,
        work_dir=work,
        server_cpus=server_cpus,
        client_cpus=client_cpus,
        profile_dir=out_dir if sample else None,
    )
    started = time.monotonic()
    summary: dict[str, Any] = {
        "meta": {
            "profile": profile.name,
            "started_at": datetime.now(UTC).isoformat(timespec="seconds"),
            "cpu_count": os.cpu_count(),
            "pinning": pinning,
            "scenarios": names,
            "notes": [
                "All servers and generators share one 2-core machine with whatever else runs "
                "on it; a surface's ratio compares its two servers alternating within one "
                "loop, a write's ratio two writes made back to back.",
                "Latency is measured from when a request was due (open loop: its scheduled "
                "arrival), so queueing in the generator or server is included.",
            ],
        }
    }
    ctx.say(f"bench: profile {profile.name}, scenarios {names}, work dir {work}")
    try:
        stack.start(token_ttl_s=profile.token_ttl_s)
        ctx.say(f"stack up (startup {stack.info.startup_s} s)")
        for name in names:
            t0 = time.monotonic()
            try:
                summary[name] = runners[name](ctx)
            except Exception as exc:  # noqa: BLE001 - one failed scenario must not lose the others
                traceback.print_exc()
                summary[name] = {"error": f"{type(exc).__name__}: {str(exc)[:500]}"}
            if isinstance(summary[name], dict) and name == "surfaces":
                summary["meta"]["surfaces"] = summary[name].pop("_meta", None)
            summary["meta"].setdefault("scenario_s", {})[name] = round(time.monotonic() - t0, 1)
            # other work on the shared machine skews every figure: record how busy it was
            summary["meta"].setdefault("loadavg_1m_after", {})[name] = round(os.getloadavg()[0], 2)
            ctx.say(f"{name} done in {time.monotonic() - t0:.1f} s")
    finally:
        stack.stop()
        summary["meta"]["duration_s"] = round(time.monotonic() - started, 1)
        checks = write_report(summary, out_dir)
        shutil.rmtree(work, ignore_errors=True)
    print(f"\nResults in {out_dir}/ (summary.json, report.md, plots)")
    print(console_summary(checks))
    failed = [n for n in names if isinstance(summary.get(n), dict) and "error" in summary[n]]
    return 1 if failed else 0


def _raise_fd_limit() -> None:
    """10,000 concurrent connections need more than the usual 1,024 descriptors; children
    (gateway, generators) inherit the raised soft limit."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = min(hard, 65536) if hard != resource.RLIM_INFINITY else 65536
    if soft < want:
        resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))


if __name__ == "__main__":
    sys.exit(main())
