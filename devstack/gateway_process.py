"""One gateway daemon (`python -m gateway serve`) as a child process, restartable on its ports.

The one gateway process of the integration tests and the hardening suites. Why a process and
not an in-process App: the tests send it SIGTERM and SIGHUP and read its exit code, the fault
suite kill -9s it, and the leak checks read its fds and sockets with psutil; all need their own
pid. The first start lets the gateway pick free ports (port 0, read back from its ports file);
a restart pins those ports so clients reconnect where they were. Every wait is bounded and the
process is only ever signalled by its own recorded pid.
"""

from __future__ import annotations

import json
import os
import signal
import sys
from collections.abc import Mapping
from contextlib import suppress
from dataclasses import dataclass, replace
from pathlib import Path

from devstack import processes
from devstack.errors import StartupError
from devstack.readiness import http_ok


class GatewayStartError(StartupError):
    """The gateway exited or did not answer in time; the message ends with its log tail."""


@dataclass(frozen=True)
class GatewayEndpoints:
    """Where a running gateway answers."""

    http_url: str
    grpc_target: str
    http_uds: str
    grpc_uds: str


class GatewayProcess:
    """A gateway started with `LAKEGATE__*` settings; ports and sockets are added here.

    Args:
        run_dir: directory for the sockets, the ports file and the logs.
        settings_env: `LAKEGATE__...` settings (they win over the defaults below).
        name: used in file names (`<name>-http.sock`, `<name>-ports.json`, `logs/<name>.log`).
        repo_root: working directory and first PYTHONPATH entry (`python -m gateway` then
            imports that checkout); None runs the installed gateway.
        base_env: the environment to start from (default: this process's).
    """

    def __init__(
        self,
        run_dir: Path,
        settings_env: Mapping[str, str],
        *,
        name: str = "gateway",
        repo_root: Path | None = None,
        python: str = sys.executable,
        base_env: Mapping[str, str] | None = None,
        extra_pythonpath: tuple[str, ...] = (),
    ) -> None:
        self.run_dir = run_dir
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self.name = name
        self._root = repo_root
        self._python = python
        inherited = os.environ if base_env is None else base_env
        # A caller's own gateway settings must not leak in and override the ones given.
        self._base_env = {k: v for k, v in inherited.items() if not k.startswith("LAKEGATE__")}
        self._base_env.update({"PYTHONUNBUFFERED": "1", "NO_PROXY": "localhost,127.0.0.1",
                               "no_proxy": "localhost,127.0.0.1"})
        paths = [*([str(repo_root)] if repo_root else []), *extra_pythonpath,
                 self._base_env.get("PYTHONPATH", "")]
        self._base_env["PYTHONPATH"] = os.pathsep.join(p for p in paths if p)
        self._ports_file = run_dir / f"{name}-ports.json"
        self.settings: dict[str, str] = {
            "LAKEGATE__LISTEN__HTTP_PORT": "0",
            "LAKEGATE__LISTEN__GRPC_PORT": "0",
            "LAKEGATE__LISTEN__HTTP_UDS": str(run_dir / f"{name}-http.sock"),
            "LAKEGATE__LISTEN__GRPC_UDS": str(run_dir / f"{name}-grpc.sock"),
            "LAKEGATE__SHUTDOWN_GRACE_S": "10",
            **settings_env,
            "LAKEGATE__LISTEN__PORTS_FILE": str(self._ports_file),
        }
        self._record: processes.ProcessRecord | None = None
        self._exit: int | None = None  # collected once: a reaped child has no second status
        self._starts = 0
        self.endpoints: GatewayEndpoints | None = None

    # ---- what tests read -------------------------------------------------------------------
    @property
    def pid(self) -> int | None:
        return self._record.pid if self._record is not None else None

    @property
    def record(self) -> processes.ProcessRecord | None:
        """The running process's record (what `devstack down` stops it by, from another
        process)."""
        return self._record

    @property
    def env(self) -> dict[str, str]:
        """The whole environment of the current (or next) start."""
        return {**self._base_env, **self.settings}

    @property
    def log_dir(self) -> Path:
        """Where every start writes its log (what a log scan reads)."""
        return self.run_dir / "logs"

    @property
    def log_path(self) -> Path:
        """This start's log (the first start writes `<name>.log`, a restart `<name>-<n>.log`)."""
        suffix = "" if self._starts <= 1 else f"-{self._starts}"
        return self.log_dir / f"{self.name}{suffix}.log"

    @property
    def http_url(self) -> str:
        return self._eps().http_url

    @property
    def grpc_target(self) -> str:
        return self._eps().grpc_target

    @property
    def http_uds(self) -> Path:
        return Path(self._eps().http_uds)

    @property
    def grpc_uds(self) -> Path:
        return Path(self._eps().grpc_uds)

    def log_text(self) -> str:
        """Every start's log, oldest first (what a log scan must see)."""
        logs = sorted(self.log_dir.glob(f"{self.name}*.log"), key=lambda p: p.stat().st_mtime)
        return "".join(p.read_text(encoding="utf-8", errors="replace") for p in logs)

    def alive(self) -> bool:
        return self._record is not None and self._collect(0.0) is None

    # ---- lifecycle -------------------------------------------------------------------------
    def start(self, timeout_s: float = 30.0, *, ready: bool = True) -> GatewayEndpoints:
        """Start and wait (bounded) for the ports file, `/livez` and, with `ready`, `/readyz`.

        Raises:
            GatewayStartError: the process exited, or did not answer within `timeout_s`.
        """
        self._ports_file.unlink(missing_ok=True)
        self._starts += 1
        self._exit = None
        # The settings go in as `env_extra` so the record can start it again (`respawn`).
        self._record = record = processes.spawn(
            self.name, [self._python, "-m", "gateway", "serve"], log_path=self.log_path,
            base_env=self._base_env, env_extra=self.settings, cwd=self._root,
        )
        probe = "/readyz" if ready else "/livez"
        try:
            processes.wait_until(record, self._ports_file.exists, timeout_s=timeout_s,
                                 what=self.name)
            ports = json.loads(self._ports_file.read_text())
            # Pinned, so a restart comes back where clients expect it.
            self.settings["LAKEGATE__LISTEN__HTTP_PORT"] = str(ports["http_port"])
            self.settings["LAKEGATE__LISTEN__GRPC_PORT"] = str(ports["grpc_port"])
            self._record = record = replace(record, env_extra=tuple(self.settings.items()))
            self.endpoints = eps = GatewayEndpoints(
                http_url=f"http://127.0.0.1:{ports['http_port']}",
                grpc_target=f"127.0.0.1:{ports['grpc_port']}",
                http_uds=self.settings["LAKEGATE__LISTEN__HTTP_UDS"],
                grpc_uds=self.settings["LAKEGATE__LISTEN__GRPC_UDS"],
            )
            processes.wait_until(record, lambda: http_ok(eps.http_url + probe, 2.0),
                                 timeout_s=timeout_s, what=self.name)
        except (StartupError, OSError, ValueError, KeyError) as exc:
            self.kill9()
            raise GatewayStartError(f"{self.name} did not start: {exc}") from None
        return eps

    def wait_ready(self, timeout_s: float = 30.0) -> float | None:
        """Seconds until `/readyz` answered 200, or None on timeout."""
        url = self._eps().http_url + "/readyz"
        return processes.poll_until(lambda: http_ok(url), timeout_s=timeout_s, interval_s=0.05)

    def signal(self, sig: signal.Signals) -> None:
        """Send `sig` (SIGHUP to reload, SIGTERM to drain) to the gateway itself."""
        if self.pid is not None and self._exit is None:
            with suppress(ProcessLookupError):
                os.kill(self.pid, sig)

    def wait(self, timeout_s: float) -> int | None:
        """The exit code once the gateway has ended (bounded), or None if it still runs."""
        return self._collect(timeout_s)

    def kill9(self) -> None:
        if self._record is not None:
            processes.kill9(self._record.pid)
            self._record = None

    def stop(self, timeout_s: float = 20.0) -> int | None:
        """SIGTERM (the gateway drains), wait up to `timeout_s`, then SIGKILL. Returns the exit
        code (None if it was not started or had to be killed)."""
        if self._record is None:
            return self._exit
        if self._collect(0.0) is None:
            self.signal(signal.SIGTERM)
            if self._collect(timeout_s) is None:
                self.kill9()
                return None
        self._record = None
        return self._exit

    def _collect(self, timeout_s: float) -> int | None:
        if self._exit is None and self._record is not None:
            self._exit = processes.exit_code(self._record.pid, timeout_s)
        return self._exit

    def _eps(self) -> GatewayEndpoints:
        if self.endpoints is None:
            raise GatewayStartError(f"{self.name} has not started")
        return self.endpoints
