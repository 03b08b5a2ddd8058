"""`lakegate serve`: settings, start-up checks, logging, the event loop and the exit code.

Settings errors and start-up failures (unusable files, a port or socket that cannot be bound)
exit 2, each naming the setting; a clean drain exits 0. The daemon itself is `gateway.app.App`.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
from collections.abc import Callable
from pathlib import Path

from gateway.app import App
from gateway.audit import configure_audit
from gateway.caller_warnings import caller_warnings
from gateway.logging import Redactor, configure_logging
from gateway.preflight import startup_problems
from gateway.reload import SettingsSource
from gateway.settings import Settings, SettingsError
from gateway.sockets import StartupError
from gateway.surfaces.callers import caller_secrets

_log = logging.getLogger("lakegate.app")


def _parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="lakegate serve", description="run the gateway daemon")
    parser.add_argument("--config", type=Path, default=None, help="YAML settings file")
    return parser.parse_args(argv)


async def _serve(settings: Settings, source: SettingsSource, redactor: Redactor) -> int:
    app = App(settings, freeze_gc=True, batch_helpers=True, reload_source=source,
              redactor=redactor)
    try:
        await app.serve()
    except StartupError as exc:
        _log.error("cannot start: %s", exc)
        print(f"cannot start: {exc}", file=sys.stderr)
        return 2
    return 0


def run(argv: list[str]) -> int:
    """`lakegate serve [--config FILE]`: returns the process exit code.

    0 after a clean drain; 2 for invalid settings, unusable files or a failed bind (the message,
    on stderr, names the setting).
    """
    args = _parse_args(argv)
    try:
        settings = Settings.load(args.config)
    except SettingsError as exc:
        print(str(exc), file=sys.stderr)
        return 2
    problems = startup_problems(settings)  # unusable files: exit 2 before any logging
    if problems:
        print("\n".join(problems), file=sys.stderr)
        return 2
    redactor = Redactor(tuple(settings.secret_values()) + tuple(caller_secrets(settings.callers)))
    configure_logging(settings.log.level, settings.log.format, redactor)
    configure_audit(settings.log.audit)
    for warning in settings.warnings():
        _log.warning(warning)
    for warning in caller_warnings(settings):
        _log.warning(warning)
    try:
        import uvloop

        loop_factory: Callable[[], asyncio.AbstractEventLoop] | None = uvloop.new_event_loop
    except ImportError:  # pragma: no cover - uvloop is pinned on Linux
        loop_factory = None
    with asyncio.Runner(loop_factory=loop_factory) as runner:
        return runner.run(
            _serve(settings, lambda: Settings.load(args.config), redactor)
        )
