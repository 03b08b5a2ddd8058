"""Spawn the stack's servers detached, wait for them with bounded timeouts, stop them by pid.

Every child gets its own session (so its process group id equals its pid and a stop reaches
any helper it forked) and its output goes to a log file in the run directory. A recorded
process is identified by (pid, create_time) so a recycled pid is never signalled.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any

import psutil

from devstack.errors import ShutdownError, StartupError


@dataclass(frozen=True)
class ProcessRecord:
    """A started process: enough to find it again and to be sure it is the same one."""

    name: str
    pid: int
    create_time: float
    log_path: str
    # How to start it again (restart of one component); env holds only the extra variables.
    argv: tuple[str, ...] = ()
    env_extra: tuple[tuple[str, str], ...] = ()

    def to_json(self) -> dict[str, object]:
        return {
            "pid": self.pid,
            "create_time": self.create_time,
            "log": self.log_path,
            "argv": list(self.argv),
            "env": dict(self.env_extra),
        }

    @classmethod
    def from_json(cls, name: str, data: Mapping[str, Any]) -> ProcessRecord:
        return cls(
            name=name,
            pid=int(data["pid"]),
            create_time=float(data["create_time"]),
            log_path=str(data.get("log", "")),
            argv=tuple(str(a) for a in data.get("argv", [])),
            env_extra=tuple((str(k), str(v)) for k, v in dict(data.get("env", {})).items()),
        )

    def __repr__(self) -> str:
        return f"ProcessRecord(name={self.name!r}, pid={self.pid})"


def spawn(
    name: str,
    argv: Sequence[str],
    *,
    log_path: Path,
    env_extra: Mapping[str, str] | None = None,
    cwd: Path | None = None,
    base_env: Mapping[str, str] | None = None,
) -> ProcessRecord:
    """Start `argv` in its own session with stdout+stderr appended to `log_path`.

    The child inherits this environment (minus `LAKEGATE__*`, so a caller's gateway settings
    never leak into the stack) plus `env_extra`. `base_env` replaces the inherited part: the
    fault suite restarts a killed server with the exact environment it had.
    """
    log_path.parent.mkdir(parents=True, exist_ok=True)
    if base_env is None:
        env = {k: v for k, v in os.environ.items() if not k.startswith("LAKEGATE__")}
    else:
        env = dict(base_env)
    env.update(env_extra or {})
    with open(log_path, "ab") as log:
        proc = subprocess.Popen(
            list(argv),
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            env=env,
            cwd=str(cwd) if cwd else None,
            start_new_session=True,
            close_fds=True,
        )
    try:
        create_time = psutil.Process(proc.pid).create_time()
    except psutil.NoSuchProcess:
        create_time = 0.0
    # The Popen object is dropped on purpose: the CLI exits while children keep running.
    # Zombies of an in-process launcher (tests) are reaped in is_alive()/stop().
    proc.returncode = 0  # keeps Popen.__del__ from warning about a still-running child
    return ProcessRecord(
        name=name,
        pid=proc.pid,
        create_time=create_time,
        log_path=str(log_path),
        argv=tuple(argv),
        env_extra=tuple((env_extra or {}).items()),
    )


def respawn(record: ProcessRecord) -> ProcessRecord:
    """Start a recorded process again with the same argv, extra env and log file."""
    if not record.argv:
        raise StartupError(f"{record.name} has no recorded command line")
    return spawn(
        record.name, record.argv, log_path=Path(record.log_path), env_extra=dict(record.env_extra)
    )


def _reap(pid: int) -> None:
    """Collect the exit status if `pid` is our own dead child (otherwise a no-op)."""
    with contextlib.suppress(ChildProcessError, OSError):
        os.waitpid(pid, os.WNOHANG)


def is_alive(record: ProcessRecord) -> bool:
    """True if the recorded process (same pid and start time) still runs and is not a zombie."""
    _reap(record.pid)
    try:
        proc = psutil.Process(record.pid)
        if record.create_time and abs(proc.create_time() - record.create_time) > 1.0:
            return False
        return bool(proc.status() != psutil.STATUS_ZOMBIE)
    except psutil.NoSuchProcess:
        return False


def log_tail(record: ProcessRecord, lines: int = 30) -> str:
    """The last `lines` lines of the process log, for error messages."""
    try:
        text = Path(record.log_path).read_text(errors="replace")
    except OSError:
        return "(no log)"
    return "\n".join(text.splitlines()[-lines:])


def wait_until(
    record: ProcessRecord,
    check: Callable[[], bool],
    *,
    timeout_s: float,
    what: str,
    interval_s: float = 0.05,
) -> None:
    """Poll `check` until it is true, the process dies, or `timeout_s` passes (bounded loop)."""
    deadline = time.monotonic() + timeout_s
    max_polls = int(timeout_s / interval_s) + 1
    for _ in range(max_polls):
        if check():
            return
        if not is_alive(record):
            raise StartupError(f"{what} exited while starting; log tail:\n{log_tail(record)}")
        if time.monotonic() > deadline:
            break
        time.sleep(interval_s)
    if check():
        return
    raise StartupError(f"{what} not ready after {timeout_s:.0f}s; log tail:\n{log_tail(record)}")


def _signal_group(pid: int, sig: signal.Signals) -> None:
    """Signal `pid` and, when it leads its own group, everything in that group."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        if os.getpgid(pid) == pid:
            os.killpg(pid, sig)
            return
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.kill(pid, sig)


def stop(
    record: ProcessRecord, *, term_timeout_s: float = 5.0, kill_timeout_s: float = 3.0
) -> None:
    """SIGTERM the process group, then SIGKILL if needed, and verify the process is gone."""
    if not is_alive(record):
        return
    _signal_group(record.pid, signal.SIGTERM)
    if _wait_gone(record, term_timeout_s):
        return
    _signal_group(record.pid, signal.SIGKILL)
    if not _wait_gone(record, kill_timeout_s):
        raise ShutdownError(f"{record.name} (pid {record.pid}) survived SIGKILL")


def _wait_gone(record: ProcessRecord, timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    for _ in range(int(timeout_s / 0.02) + 1):
        if not is_alive(record):
            return True
        if time.monotonic() > deadline:
            break
        time.sleep(0.02)
    return not is_alive(record)


# ---- by pid: what the fault suites and the bench need beyond a recorded start ----------------


def wait_gone(pid: int, timeout_s: float) -> bool:
    """Wait (bounded) until `pid` no longer runs; reaps it if it is our child."""
    deadline = time.monotonic() + timeout_s
    for _ in range(int(timeout_s / 0.05) + 1):
        _reap(pid)
        try:
            if psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
                return True
        except psutil.NoSuchProcess:
            return True
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return False


def kill9(pid: int) -> None:
    """SIGKILL the process and, when it leads its own group, everything in that group."""
    _signal_group(pid, signal.SIGKILL)
    wait_gone(pid, timeout_s=10)


def exit_code(pid: int, timeout_s: float) -> int | None:
    """The exit code of our own child `pid`, waiting (bounded) for it to end; None if it is
    still running at the deadline or is not our child."""
    deadline = time.monotonic() + timeout_s
    for _ in range(int(timeout_s / 0.05) + 1):
        try:
            done, status = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            return None
        if done:
            return os.waitstatus_to_exitcode(status)
        if time.monotonic() > deadline:
            return None
        time.sleep(0.05)
    return None


def poll_until(
    check: Callable[[], bool], *, timeout_s: float, interval_s: float = 0.1
) -> float | None:
    """Poll `check` (bounded); returns the seconds waited, or None on timeout."""
    start = time.monotonic()
    for _ in range(int(timeout_s / interval_s) + 1):
        if check():
            return time.monotonic() - start
        if time.monotonic() - start > timeout_s:
            break
        time.sleep(interval_s)
    return None


@dataclass
class ProcessTable:
    """Every process one harness started; `stop_all` stops them by pid, newest first."""

    started: list[ProcessRecord] = field(default_factory=list)

    def spawn(
        self,
        name: str,
        argv: Sequence[str],
        *,
        log_path: Path,
        base_env: Mapping[str, str] | None = None,
        env_extra: Mapping[str, str] | None = None,
        cwd: Path | None = None,
    ) -> ProcessRecord:
        record = spawn(
            name, argv, log_path=log_path, base_env=base_env, env_extra=env_extra, cwd=cwd
        )
        self.started.append(record)
        return record

    def forget(self, pid: int) -> None:
        self.started = [r for r in self.started if r.pid != pid]

    def stop_all(self, timeout_s: float = 10.0) -> None:
        """SIGTERM each process group, SIGKILL what outlives `timeout_s` (never a recycled pid)."""
        for record in reversed(self.started):
            stop(record, term_timeout_s=timeout_s)
        self.started.clear()


def listen_addresses(pid: int) -> set[str]:
    """The IP addresses that ``pid`` and its descendants listen on (TCP) or bind (UDP).

    Why: every process of the local stack must bind loopback only; a test reads this, not the
    settings that were meant to make it so.
    """
    try:
        root = psutil.Process(pid)
        family = [root, *root.children(recursive=True)]
    except psutil.NoSuchProcess:
        return set()
    found: set[str] = set()
    for proc in family:
        with contextlib.suppress(psutil.NoSuchProcess, psutil.AccessDenied):
            for conn in proc.net_connections(kind="inet"):
                bound_udp = conn.type == 2 and not conn.raddr  # SOCK_DGRAM, not connected
                if conn.status == psutil.CONN_LISTEN or bound_udp:
                    found.add(conn.laddr.ip)
    return found


def is_loopback(address: str) -> bool:
    """127.0.0.0/8, ::1, or an IPv4-mapped loopback (``::ffff:127.0.0.1``)."""
    import ipaddress

    ip = ipaddress.ip_address(address.split("%", 1)[0])
    mapped = getattr(ip, "ipv4_mapped", None)
    return ip.is_loopback or (mapped is not None and mapped.is_loopback)


EXIT_INTERRUPTED = 130  # exit code after sigterm_interrupts unwound, as a shell reports Ctrl-C


@contextlib.contextmanager
def sigterm_interrupts() -> Iterator[None]:
    """While inside, SIGTERM raises KeyboardInterrupt, as Ctrl-C does: every `finally` on the way
    out then stops by pid what it started (SIGTERM's default action would leave the servers of
    a demo or a bench running). The previous handler comes back on leaving."""
    previous = signal.signal(signal.SIGTERM, _interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt(f"signal {signum}")
