"""Run a real `lakegate serve` process for the suites, restartable on the same ports.

Why a process and not an in-process App: the fault suite kill -9s it, and the leak checks read
its fds and sockets with psutil; both need a separate pid. The first start picks free ports
(port 0, read back from the ports file); restarts pin those ports so clients reconnect.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from hardening.processes import HarnessError, ProcessTable, http_ok, kill9, terminate, wait_until


@dataclass(frozen=True)
class GatewayEndpoints:
    """Where a running gateway answers."""

    http_url: str
    grpc_target: str
    http_uds: str
    grpc_uds: str


class GatewayProcess:
    """One gateway daemon started with `LAKEGATE__*` settings.

    Args:
        run_dir: directory for sockets, the ports file and logs.
        settings_env: `LAKEGATE__...` variables (ports and sockets are added here).
        repo_root: working directory (so `python -m gateway` imports this checkout).
        name: used in log file names.
    """

    def __init__(
        self,
        run_dir: Path,
        settings_env: Mapping[str, str],
        *,
        repo_root: Path,
        name: str = "gateway",
        python: str = sys.executable,
        base_env: Mapping[str, str] | None = None,
        extra_pythonpath: tuple[str, ...] = (),
    ) -> None:
        self._dir = run_dir
        self._dir.mkdir(parents=True, exist_ok=True)
        self._name = name
        self._root = repo_root
        self._python = python
        # The daemon reads only LAKEGATE__* settings; inherited ones must not leak in.
        inherited = os.environ if base_env is None else base_env
        self._base_env = {k: v for k, v in inherited.items() if not k.startswith("LAKEGATE")}
        self._base_env["PYTHONUNBUFFERED"] = "1"
        self._env = dict(settings_env)
        self._pythonpath = os.pathsep.join((str(repo_root), *extra_pythonpath))
        self._ports_file = self._dir / f"{name}-ports.json"
        self._env.setdefault("LAKEGATE__LISTEN__HTTP_PORT", "0")
        self._env.setdefault("LAKEGATE__LISTEN__GRPC_PORT", "0")
        self._env.setdefault("LAKEGATE__LISTEN__HTTP_UDS", str(self._dir / f"{name}-http.sock"))
        self._env.setdefault("LAKEGATE__LISTEN__GRPC_UDS", str(self._dir / f"{name}-grpc.sock"))
        self._env["LAKEGATE__LISTEN__PORTS_FILE"] = str(self._ports_file)
        self._procs = ProcessTable()
        self._starts = 0
        self.pid: int | None = None
        self.endpoints: GatewayEndpoints | None = None

    @property
    def log_dir(self) -> Path:
        return self._dir / "logs"

    def start(self, timeout_s: float = 30.0) -> GatewayEndpoints:
        """Start and wait until `/livez` answers (bounded)."""
        self._ports_file.unlink(missing_ok=True)
        self._starts += 1
        env = {**self._base_env, **self._env, "PYTHONPATH": self._pythonpath}
        self.pid = self._procs.spawn(
            self._name,
            [self._python, "-m", "gateway", "serve"],
            env=env,
            cwd=str(self._root),
            log_path=self.log_dir / f"{self._name}-{self._starts}.log",
        )
        if wait_until(self._ports_file.exists, timeout_s=timeout_s) is None:
            raise HarnessError(
                f"{self._name} wrote no ports file in {timeout_s}s; see {self.log_dir}"
            )
        ports = json.loads(self._ports_file.read_text())
        # Pin the ports so a restart comes back where clients expect it.
        self._env["LAKEGATE__LISTEN__HTTP_PORT"] = str(ports["http_port"])
        self._env["LAKEGATE__LISTEN__GRPC_PORT"] = str(ports["grpc_port"])
        self.endpoints = eps = GatewayEndpoints(
            http_url=f"http://127.0.0.1:{ports['http_port']}",
            grpc_target=f"127.0.0.1:{ports['grpc_port']}",
            http_uds=self._env["LAKEGATE__LISTEN__HTTP_UDS"],
            grpc_uds=self._env["LAKEGATE__LISTEN__GRPC_UDS"],
        )
        if wait_until(lambda: http_ok(eps.http_url + "/livez"), timeout_s=timeout_s) is None:
            raise HarnessError(f"{self._name} /livez never answered; see {self.log_dir}")
        return self.endpoints

    def wait_ready(self, timeout_s: float = 30.0) -> float | None:
        """Seconds until `/readyz` answered 200, or None on timeout."""
        assert self.endpoints is not None
        url = self.endpoints.http_url + "/readyz"
        return wait_until(lambda: http_ok(url), timeout_s=timeout_s, interval_s=0.05)

    def kill9(self) -> None:
        if self.pid is not None:
            kill9(self.pid)
            self._procs.forget(self.pid)
            self.pid = None

    def stop(self, timeout_s: float = 15.0) -> None:
        if self.pid is not None:
            terminate(self.pid, timeout_s)
            self._procs.forget(self.pid)
            self.pid = None
        self._procs.stop_all()
