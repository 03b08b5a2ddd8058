"""`python -m hardening` (fault, hostile-input and isolation suites) and `--soak`.

Starts its own local stack in a temporary run directory, runs the suites, scans every log of the
run for secrets, writes `hardening/latest/report.md` and `summary.json`, stops everything it
started by pid, and exits non-zero when the run failed.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
import traceback
from pathlib import Path

from hardening.report import HardeningReport, write_report

REPO_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_OUT = REPO_ROOT / "hardening" / "latest"


def _parse(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m hardening", description=__doc__)
    p.add_argument("--soak", action="store_true", help="run the ~20 min soak instead of the suites")
    p.add_argument("--soak-minutes", type=float, default=20.0)
    p.add_argument(
        "--suites", default="faults,hostile,isolation,model", help="comma list of suites to run"
    )
    p.add_argument("--faults", default="", help="comma list of fault names (default: all)")
    p.add_argument(
        "--quick", action="store_true", help="fewer fuzz examples and shorter holds (smoke)"
    )
    p.add_argument(
        "--out",
        type=Path,
        default=None,
        help="report directory (default hardening/latest or hardening/soak)",
    )
    p.add_argument("--keep", action="store_true", help="keep the temporary run directory")
    p.add_argument(
        "--scan",
        type=Path,
        action="append",
        default=[],
        help="only scan these log dirs for secrets and exit",
    )
    return p.parse_args(argv)


def _scan_only(paths: list[Path]) -> int:
    from hardening.secret_scanner import SecretScanner

    files, findings = SecretScanner().scan_paths(paths)
    for f in findings:
        print(f.describe())
    print(f"{files} files scanned, {len(findings)} secrets found")
    return 1 if findings else 0


def run_suites(args: argparse.Namespace, run_dir: Path) -> HardeningReport:
    from hardening.environment import start_environment, stop_environment
    from hardening.faults import FaultTiming, run_fault_suite
    from hardening.hostile_suite import run_hostile_suite
    from hardening.isolation import run_isolation_suite

    report = HardeningReport()
    suites = [s.strip() for s in args.suites.split(",") if s.strip()]
    started = time.monotonic()
    if "model" in suites:
        from hardening.model import run_model_suite

        model = run_model_suite(REPO_ROOT, sys.executable)
        report.extra["model"] = model
        if not model["passed"]:
            report.suites_skipped["model"] = "the credential cache model test failed (see extra)"
        if suites == ["model"]:
            report.duration_s = time.monotonic() - started
            return report
    try:
        ctx = start_environment(run_dir, REPO_ROOT, token_ttl_s=120)
    except Exception as exc:  # noqa: BLE001 - still write a (failing) report saying why
        report.suites_skipped["environment"] = _describe(exc)
        report.duration_s = time.monotonic() - started
        return report
    try:
        if "faults" in suites:
            timing = (
                FaultTiming(hold_s=8.0, recovery_timeout_s=45.0) if args.quick else FaultTiming()
            )
            only = {f for f in args.faults.split(",") if f} or None
            try:
                report.faults = run_fault_suite(ctx, timing, only)
            except Exception as exc:  # noqa: BLE001 - one broken suite must not hide the others
                report.suites_skipped["faults"] = _describe(exc)
        if "isolation" in suites:
            try:
                run_isolation_suite(ctx, report.isolation)
            except Exception as exc:  # noqa: BLE001 - one broken suite must not hide the others
                report.suites_skipped["isolation"] = _describe(exc)
        if "hostile" in suites:
            try:
                run_hostile_suite(ctx, report.fuzz, quick=args.quick)
            except Exception as exc:  # noqa: BLE001 - one broken suite must not hide the others
                report.suites_skipped["hostile"] = _describe(exc)
    finally:
        stop_environment(ctx)
    _scan_logs(report, ctx.scanner, run_dir)
    report.duration_s = time.monotonic() - started
    return report


def _scan_logs(report: HardeningReport, scanner: object, run_dir: Path) -> None:
    """Gateway and client logs must hold no secret; stack logs are scanned for information."""
    from hardening.secret_scanner import SecretScanner

    assert isinstance(scanner, SecretScanner)
    ours = [p for p in (run_dir / "gateways", run_dir / "load") if p.exists()]
    files, findings = scanner.scan_paths(ours)
    report.log_files_scanned = files
    report.secrets_found = len(findings)
    report.secret_findings = [f.describe().replace(str(run_dir), "<run>") for f in findings[:100]]
    stack_files, stack_findings = scanner.scan_paths(
        [p for p in (run_dir / "stack", run_dir / "logs") if p.exists()]
    )
    report.extra["stack_logs"] = {
        "files": stack_files,
        "secrets_found": len(stack_findings),
        "note": "IdP/SeaweedFS/emulator logs, not Lakegate's",
    }


def _describe(exc: BaseException) -> str:
    tb = traceback.extract_tb(exc.__traceback__)
    where = f" at {tb[-1].filename.rsplit('/', 1)[-1]}:{tb[-1].lineno}" if tb else ""
    return f"{type(exc).__name__}: {str(exc)[:300]}{where}"


def main(argv: list[str] | None = None) -> int:
    args = _parse(sys.argv[1:] if argv is None else argv)
    if args.scan:
        return _scan_only(args.scan)
    run_dir = Path(tempfile.mkdtemp(prefix="lakegate-harden-"))
    try:
        if args.soak:
            from hardening.soak import run_soak

            out = args.out or REPO_ROOT / "hardening" / "soak"
            report = run_soak(run_dir, REPO_ROOT, minutes=args.soak_minutes)
        else:
            out = args.out or DEFAULT_OUT
            report = run_suites(args, run_dir)
        report_path, summary_path = write_report(report, out)
        print(report_path.read_text())
        print(f"wrote {report_path} and {summary_path}")
        return 0 if report.passed else 1
    finally:
        if args.keep:
            print(f"run directory kept: {run_dir}")
        else:
            shutil.rmtree(run_dir, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
