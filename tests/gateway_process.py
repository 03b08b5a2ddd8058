"""Run `python -m gateway serve` as a subprocess for tests: start, wait for /readyz, stop by pid.

Used by integration tests that need a gateway with settings other than the devstack's own
(token-mode callers, policies, short lifetimes, ...):

    env = stack_env(devstack.info) | {"LAKEGATE__CALLERS__MODE": "token", ...}
    with running_gateway(tmp_path, env) as gw:
        ... gw.http_url ... gw.grpc_target ... gw.http_uds ... gw.log_text() ...

(or `gw = start_gateway(tmp_path, env)` ... `gw.stop()`, which returns the exit code).

Every wait is bounded; the process is stopped by its pid (SIGTERM, then SIGKILL after a timeout).
Its stdout/stderr go to `<run_dir>/gateway.log` (JSON lines), for log scans.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parent.parent


class GatewayStartError(RuntimeError):
    """The gateway exited or did not become ready in time; the message ends with its log tail."""


def stack_env(info: Mapping[str, Any], *, client: str = "gateway") -> dict[str, str]:
    """LAKEGATE__ settings wiring a gateway to a running devstack (stack.json contents).

    Args:
        info: the devstack's stack.json as a dict.
        client: the IdP client the gateway logs in as.
    """
    def get(dotted: str) -> Any:
        node: Any = info
        for part in dotted.split("."):
            if not isinstance(node, Mapping) or part not in node:
                return None
            node = node[part]
        return node

    env = {
        "LAKEGATE__UPSTREAM__URL": str(get("catalog.url")),
        "LAKEGATE__TOKEN__KIND": "client_credentials",
        "LAKEGATE__TOKEN__TOKEN_URL": str(get("idp.token_url")),
        "LAKEGATE__TOKEN__CLIENT_ID": str(get(f"idp.clients.{client}.id")),
        "LAKEGATE__TOKEN__CLIENT_SECRET": str(get(f"idp.clients.{client}.secret")),
    }
    if get("idp.audience"):
        env["LAKEGATE__TOKEN__AUDIENCE"] = str(get("idp.audience"))
    if get("catalog.roles.read"):
        env["LAKEGATE__UPSTREAM__READ_ROLE_ID"] = str(get("catalog.roles.read"))
    if get("catalog.roles.write"):
        env["LAKEGATE__UPSTREAM__WRITE_ROLE_ID"] = str(get("catalog.roles.write"))
    return env


@dataclass
class GatewayProcess:
    """A running gateway subprocess and its addresses."""

    proc: subprocess.Popen[bytes]
    run_dir: Path
    http_port: int
    grpc_port: int
    http_uds: Path
    grpc_uds: Path
    log_path: Path
    env: dict[str, str] = field(repr=False)

    @property
    def pid(self) -> int:
        return self.proc.pid

    @property
    def http_url(self) -> str:
        return f"http://127.0.0.1:{self.http_port}"

    @property
    def grpc_target(self) -> str:
        return f"127.0.0.1:{self.grpc_port}"

    def log_text(self) -> str:
        try:
            return self.log_path.read_text(encoding="utf-8", errors="replace")
        except FileNotFoundError:
            return ""

    def stop(self, timeout_s: float = 20.0) -> int | None:
        """SIGTERM by pid, wait up to `timeout_s`, then SIGKILL. Returns the exit code."""
        if self.proc.poll() is None:
            try:
                os.kill(self.proc.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
            try:
                self.proc.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                os.kill(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout=10)
        return self.proc.returncode


def _get(url: str, timeout_s: float) -> int:
    # Loopback only; bypass any HTTP(S)_PROXY from the environment.
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with opener.open(url, timeout=timeout_s) as resp:
            return int(resp.status)
    except urllib.error.HTTPError as exc:
        return int(exc.code)
    except (urllib.error.URLError, OSError):
        return 0


def start_gateway(
    run_dir: Path,
    env: Mapping[str, str],
    *,
    ready_timeout_s: float = 30.0,
    wait_ready: bool = True,
    name: str = "gateway",
) -> GatewayProcess:
    """Start `python -m gateway serve` with `env` (LAKEGATE__ settings) on free ports.

    Ports are picked by the gateway (port 0) and read back from its ports file; UDS paths are
    `<run_dir>/<name>-http.sock` / `-grpc.sock` unless `env` sets them.

    Raises:
        GatewayStartError: the process exited, or /readyz was not 200 within the timeout.
    """
    run_dir.mkdir(parents=True, exist_ok=True)
    ports_file = run_dir / f"{name}-ports.json"
    ports_file.unlink(missing_ok=True)
    full_env = {k: v for k, v in os.environ.items() if not k.startswith("LAKEGATE__")}
    full_env.update(
        {
            "LAKEGATE__LISTEN__HTTP_PORT": "0",
            "LAKEGATE__LISTEN__GRPC_PORT": "0",
            "LAKEGATE__LISTEN__HTTP_UDS": str(run_dir / f"{name}-http.sock"),
            "LAKEGATE__LISTEN__GRPC_UDS": str(run_dir / f"{name}-grpc.sock"),
            "LAKEGATE__SHUTDOWN_GRACE_S": "10",
            "NO_PROXY": "localhost,127.0.0.1",
            "no_proxy": "localhost,127.0.0.1",
        }
    )
    full_env.update(env)
    full_env["LAKEGATE__LISTEN__PORTS_FILE"] = str(ports_file)
    full_env["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(REPO_ROOT), full_env.get("PYTHONPATH", "")) if p
    )
    log_path = run_dir / f"{name}.log"
    with log_path.open("ab") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "gateway", "serve"],
            cwd=REPO_ROOT, env=full_env, stdout=log, stderr=subprocess.STDOUT,
        )
    deadline = time.monotonic() + ready_timeout_s
    ports: dict[str, int] | None = None
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise GatewayStartError(
                f"gateway exited with {proc.returncode}:\n{_tail(log_path)}"
            )
        if ports is None and ports_file.exists():
            try:
                ports = json.loads(ports_file.read_text())
            except ValueError:
                ports = None
        if ports is not None and (
            not wait_ready or _get(f"http://127.0.0.1:{ports['http_port']}/readyz", 2.0) == 200
        ):
            return GatewayProcess(
                proc=proc, run_dir=run_dir, http_port=int(ports["http_port"]),
                grpc_port=int(ports["grpc_port"]),
                http_uds=Path(full_env["LAKEGATE__LISTEN__HTTP_UDS"]),
                grpc_uds=Path(full_env["LAKEGATE__LISTEN__GRPC_UDS"]),
                log_path=log_path, env=full_env,
            )
        time.sleep(0.1)
    gw_tail = _tail(log_path)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=10)
    raise GatewayStartError(f"gateway not ready after {ready_timeout_s} s:\n{gw_tail}")


@contextmanager
def running_gateway(
    run_dir: Path, env: Mapping[str, str], **kwargs: Any
) -> Iterator[GatewayProcess]:
    """`start_gateway` as a context manager; stops the process by pid on exit."""
    proc = start_gateway(run_dir, env, **kwargs)
    try:
        yield proc
    finally:
        proc.stop()


def _tail(path: Path, lines: int = 30) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except FileNotFoundError:
        return ""
