"""`lakegate check`: prove a node's settings work end to end before (or instead of) serving.

One line per step, in order: the settings load, every file they name is usable, the IdP grants a
token, the catalog answers, the warehouse resolves to its id; then the `clock` line, when the IdP
or the catalog answered with a `Date`: whether their clocks agree with the local one (beyond the
plausible skew it FAILs: credentials would be judged by the earlier deadline, see the clock rule
in docs/contracts.md §3). Exit 0 only when every step passes, 1 when a step fails (later steps
are skipped: they depend on it), 2 for invalid settings (as `lakegate serve`).
Nothing secret is printed: no token, no client secret, and every error line is
scrubbed of the configured secret values.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TextIO

from gateway.caller_warnings import caller_warnings
from gateway.clock import SystemClock
from gateway.clock_skew import ClockSkew
from gateway.metrics import Metrics
from gateway.models import RequestContext
from gateway.preflight import startup_problems
from gateway.settings import Settings, SettingsError, TokenKind
from gateway.upstream.lakekeeper import CatalogClient
from gateway.upstream.token_source import build_token_source
from gateway.upstream.transport import AiohttpTransport, upstream_ssl_context
from gateway.upstream.wire import CatalogConfig


class _Report:
    """Prints `ok`/`FAIL` lines with secrets scrubbed; remembers whether anything failed."""

    def __init__(self, out: TextIO, secrets: list[str]) -> None:
        self._out = out
        self._secrets = [s for s in secrets if s]
        self.failed = False

    def warn(self, step: str, detail: str) -> None:
        """A `warn` line: worth fixing, not a failure (the exit code is unchanged)."""
        print(f"warn {step}: {detail}", file=self._out, flush=True)

    def line(self, ok: bool, step: str, detail: str) -> None:
        for secret in self._secrets:
            detail = detail.replace(secret, "***")
        self.failed |= not ok
        print(f"{'ok  ' if ok else 'FAIL'} {step}: {detail}", file=self._out, flush=True)


def _parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="lakegate check", description="check settings, IdP, catalog and a warehouse"
    )
    parser.add_argument("--config", type=Path, default=None, help="YAML settings file")
    parser.add_argument("--warehouse", default=None, help="warehouse name to resolve")
    return parser.parse_args(argv)


def run_check(argv: list[str], out: TextIO = sys.stdout) -> int:
    """`lakegate check [--config FILE] [--warehouse NAME]`: returns the process exit code."""
    args = _parse_args(argv)
    try:
        settings = Settings.load(args.config)
    except SettingsError as exc:
        print(f"FAIL settings: {exc}", file=out)
        return 2
    report = _Report(out, settings.secret_values())
    report.line(
        True,
        "settings",
        f"upstream {settings.upstream.url}, token {settings.token.kind.value}, "
        f"callers {settings.callers.mode.value}",
    )
    problems = startup_problems(settings)
    if problems:
        for problem in problems:
            report.line(False, "files", problem)
        return 2
    report.line(True, "files", "every file the settings name is readable and well-formed")
    for warning in caller_warnings(settings):
        report.warn("callers", warning)
    asyncio.run(_upstream_steps(settings, args.warehouse, report))
    return 1 if report.failed else 0


async def _step(
    report: _Report, step: str, timeout_s: float, call: Callable[[], Awaitable[Any]]
) -> Any:
    """Run one step under a timeout; a failure is reported (type and message) and returns None."""
    try:
        return await asyncio.wait_for(call(), timeout=timeout_s)
    except TimeoutError:
        report.line(False, step, f"no answer within {timeout_s:.0f} s")
    except Exception as exc:  # noqa: BLE001 - every failure is one FAIL line, not a traceback
        report.line(False, step, f"{type(exc).__name__}: {exc}")
    return None


async def _upstream_steps(settings: Settings, warehouse: str | None, report: _Report) -> None:
    clock = SystemClock()
    metrics = Metrics()
    transport = AiohttpTransport(
        pool_size=4,
        ssl_context=upstream_ssl_context(settings.upstream),
        trust_env=settings.upstream.trust_env,
    )
    skew = ClockSkew(clock, metrics)
    tokens = build_token_source(settings.token, transport, clock, metrics, skew=skew)
    catalog = CatalogClient(transport, tokens, settings.upstream, metrics, clock, skew=skew)
    timeout_s = settings.upstream.deadline_s + settings.token.timeout_s
    try:
        if settings.token.kind is TokenKind.NONE:
            report.line(True, "idp", "skipped: token kind none (the catalog needs no token)")
        else:
            token = await _step(report, "idp", timeout_s, tokens.token)
            if token is None:
                if not report.failed:
                    report.line(False, "idp", "no token granted")
                return
            where = settings.token.token_url or settings.token.kind.value
            report.line(True, "idp", f"token granted ({where})")
        if not warehouse:
            report.line(False, "catalog", "no warehouse to resolve: pass --warehouse NAME")
            return
        ctx = RequestContext(request_id=f"check-{uuid.uuid4().hex[:12]}")
        config = await _step(report, "catalog", timeout_s, lambda: catalog.config(warehouse, ctx))
        if config is None:
            return
        report.line(True, "catalog", f"reached {settings.upstream.url}")
        prefix = CatalogConfig.model_validate(config).prefix()
        if prefix is None:
            report.line(False, "warehouse", f"{warehouse!r}: the catalog config has no prefix")
            return
        report.line(True, "warehouse", f"{warehouse!r} resolves to {prefix}")
        clock_line(report, skew)
    finally:
        await tokens.close()
        await transport.close()


def clock_line(report: _Report, skew: ClockSkew) -> None:
    """One `clock` line: each remote clock heard (its `Date`) against the local wall clock."""
    skews = skew.skews()
    if not skews:
        return
    detail = ", ".join(f"{name} {value:+.1f} s" for name, value in sorted(skews.items()))
    off = sorted(name for name, value in skews.items() if abs(value) > skew.max_skew_s)
    if off:
        report.line(False, "clock", (
            f"remote clock minus local: {detail}; {' and '.join(off)} beyond "
            f"{skew.max_skew_s:.0f} s: credentials are judged by the earlier deadline "
            "unless two clocks agree (fix NTP on the host that is off)"))
    else:
        report.line(True, "clock", f"remote clock minus local: {detail}")
