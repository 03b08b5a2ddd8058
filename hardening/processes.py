"""Kill -9 and restart a server process exactly as it was started.

Why capture from the live process (psutil: argv, environment, cwd) instead of asking the
launcher: the fault suite must restart the IdP, the catalog emulator and SeaweedFS the way the
stack started them, and the stack's launcher exposes start/stop of the whole stack only. Every
process this module starts is recorded by pid and stopped by pid, never by name.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import psutil

from devstack import processes


class HarnessError(Exception):
    """The harness itself could not set up or restore a fault (not a gateway defect)."""


@dataclass(frozen=True)
class ProcessSpec:
    """How to start a process again: argv, environment and working directory."""

    name: str
    argv: tuple[str, ...]
    env: Mapping[str, str]
    cwd: str


def capture(name: str, pid: int) -> ProcessSpec:
    """Record how `pid` was started, so it can be respawned after a kill -9."""
    proc = psutil.Process(pid)
    return ProcessSpec(
        name=name, argv=tuple(proc.cmdline()), env=dict(proc.environ()), cwd=proc.cwd()
    )


def kill9(pid: int) -> None:
    """SIGKILL the process and, when it leads its own group, everything in that group."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        if os.getpgid(pid) == pid:
            os.killpg(pid, signal.SIGKILL)
        else:
            os.kill(pid, signal.SIGKILL)
    wait_gone(pid, timeout_s=10)


def wait_gone(pid: int, timeout_s: float) -> bool:
    """Wait (bounded) until `pid` no longer runs; reaps it if it is our child."""
    deadline = time.monotonic() + timeout_s
    for _ in range(int(timeout_s / 0.05) + 1):
        with contextlib.suppress(ChildProcessError, OSError):
            os.waitpid(pid, os.WNOHANG)
        try:
            if psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
                return True
        except psutil.NoSuchProcess:
            return True
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return False


@dataclass
class ProcessTable:
    """Every process the harness started; `stop_all` stops them by pid (reverse order)."""

    started: list[tuple[str, int]] = field(default_factory=list)

    def spawn(
        self, name: str, argv: Sequence[str], *, env: Mapping[str, str], cwd: str, log_path: Path
    ) -> int:
        # Same spawn as the stack's (own session, log file, pid record); reaped by waitpid here.
        record = processes.spawn(name, argv, log_path=log_path, base_env=env, cwd=Path(cwd))
        self.started.append((name, record.pid))
        return record.pid

    def respawn(self, spec: ProcessSpec, log_path: Path) -> int:
        return self.spawn(spec.name, spec.argv, env=spec.env, cwd=spec.cwd, log_path=log_path)

    def forget(self, pid: int) -> None:
        self.started = [(n, p) for n, p in self.started if p != pid]

    def stop_all(self, timeout_s: float = 10.0) -> None:
        for _, pid in reversed(self.started):
            terminate(pid, timeout_s)
        self.started.clear()


def terminate(pid: int, timeout_s: float = 10.0) -> None:
    """SIGTERM, wait (bounded), then SIGKILL."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.kill(pid, signal.SIGTERM)
    if not wait_gone(pid, timeout_s):
        kill9(pid)


def wait_until(
    check: Callable[[], bool], *, timeout_s: float, interval_s: float = 0.1
) -> float | None:
    """Poll `check` (bounded); returns seconds waited, or None on timeout."""
    start = time.monotonic()
    for _ in range(int(timeout_s / interval_s) + 1):
        if check():
            return time.monotonic() - start
        if time.monotonic() - start > timeout_s:
            break
        time.sleep(interval_s)
    return None


def port_open(host: str, port: int) -> bool:
    with contextlib.suppress(OSError), socket.create_connection((host, port), timeout=0.5):
        return True
    return False


def http_ok(url: str, timeout_s: float = 2.0, headers: Mapping[str, str] | None = None) -> bool:
    """True if GET `url` answers 2xx (used for readiness probes)."""
    req = urllib.request.Request(url, headers=dict(headers or {}))  # noqa: S310 - loopback URLs only
    try:
        with urllib.request.urlopen(req, timeout=timeout_s) as resp:  # noqa: S310
            return 200 <= resp.status < 300
    except (urllib.error.URLError, OSError, ValueError):
        return False
