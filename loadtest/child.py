"""A baseline server child process the bench started: start, wait until listening, stop; and
the per-pid measures (pin, CPU, RSS) the bench takes of it and of its gateways.

Only processes started here are ever signalled, and only by their own pid.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import IO, Any


def pin(pid: int, cpus: set[int]) -> None:
    """Pin every thread of process `pid` (affinity is per thread on Linux)."""
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            os.sched_setaffinity(int(tid), cpus)
        except OSError:
            pass  # the thread exited meanwhile


def cpu_s(pid: int) -> float:
    """User + system CPU seconds process `pid` has used so far."""
    import psutil

    times = psutil.Process(pid).cpu_times()
    return float(times.user + times.system)


def rss_bytes(pid: int) -> int:
    import psutil

    return int(psutil.Process(pid).memory_info().rss)


class ChildStartError(RuntimeError):
    """The child exited or did not report its ports in time (its log tail is included)."""


class ChildProcess:
    """One child process with its log file and an optional JSON ports file.

    Args:
        name: short name for logs and errors.
        argv: the command.
        log_path: stdout+stderr go here.
        env: full environment for the child.
        ports_file: a JSON file the child writes once listening (None = do not wait for one).
    """

    def __init__(
        self,
        name: str,
        argv: Sequence[str],
        log_path: Path,
        env: Mapping[str, str] | None = None,
        ports_file: Path | None = None,
    ) -> None:
        self.name = name
        self._argv = list(argv)
        self._env = dict(env) if env is not None else dict(os.environ)
        self.log_path = log_path
        self.ports_file = ports_file
        self._proc: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None

    @property
    def pid(self) -> int:
        if self._proc is None:
            raise ChildStartError(f"{self.name} is not started")
        return self._proc.pid

    def start(self, timeout_s: float = 60.0) -> dict[str, Any]:
        """Start the child and wait (bounded) for its ports file; returns its JSON or {}."""
        if self.ports_file is not None and self.ports_file.exists():
            self.ports_file.unlink()
        self._log = self.log_path.open("ab")
        self._proc = subprocess.Popen(
            self._argv,
            env=self._env,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        if self.ports_file is None:
            return {}
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                raise ChildStartError(
                    f"{self.name} exited with {self._proc.returncode}: {self.log_tail()}"
                )
            if self.ports_file.exists():
                try:
                    data: dict[str, Any] = json.loads(self.ports_file.read_text())
                    return data
                except json.JSONDecodeError:
                    pass  # half-written; read again
            time.sleep(0.05)
        self.stop()
        raise ChildStartError(f"{self.name} did not listen within {timeout_s} s: {self.log_tail()}")

    def log_tail(self, n_chars: int = 1500) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-n_chars:]
        except OSError:
            return ""

    def alive(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def stop(self, timeout_s: float = 15.0) -> None:
        """SIGTERM, wait, then SIGKILL: always by this child's own pid. Idempotent."""
        if self._proc is not None and self._proc.poll() is None:
            os.kill(self._proc.pid, signal.SIGTERM)
            try:
                self._proc.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                os.kill(self._proc.pid, signal.SIGKILL)
                self._proc.wait(timeout=5)
        if self._log is not None:
            self._log.close()
            self._log = None


def start_baseline(
    work_dir: Path, server_cpus: set[int] | None, http_body: bytes, grpc_body: bytes,
    aws_body: bytes | None = None,
) -> tuple[ChildProcess, dict[str, Any]]:
    """The trivial servers (loadtest/baselines.py) in a child answering the given bodies, on
    TCP and on `work_dir/baseline-{http,grpc}.sock`, pinned like the gateway. Returns the child
    and its ports ({"http_port", "grpc_port"}); the caller stops it."""
    d = work_dir
    (d / "baseline-http-body.json").write_bytes(http_body)
    (d / "baseline-grpc-body.bin").write_bytes(grpc_body)
    argv = [
        sys.executable, "-m", "loadtest.baselines",
        "--ports-file", str(d / "baseline-ports.json"),
        "--http-uds", str(d / "baseline-http.sock"),
        "--grpc-uds", str(d / "baseline-grpc.sock"),
        "--http-body", str(d / "baseline-http-body.json"),
        "--grpc-body", str(d / "baseline-grpc-body.bin"),
    ]
    if aws_body is not None:
        (d / "baseline-aws-body.json").write_bytes(aws_body)
        argv += ["--aws-body", str(d / "baseline-aws-body.json")]
    child = ChildProcess("baseline", argv, d / "baseline.log",
                         ports_file=d / "baseline-ports.json")
    ports = child.start(timeout_s=30)
    if server_cpus:
        pin(child.pid, server_cpus)
    return child, ports
