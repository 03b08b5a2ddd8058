"""Start the devstack's GatewayProcess from this checkout for tests: wait for /readyz, stop by pid.

Used by integration tests that need a gateway with settings other than the devstack's own
(token-mode callers, policies, short lifetimes, ...):

    env = stack_env(devstack.info) | {"LAKEGATE__CALLERS__MODE": "token", ...}
    with running_gateway(tmp_path, env) as gw:
        ... gw.http_url ... gw.grpc_target ... gw.http_uds ... gw.log_text() ...

(or `gw = start_gateway(tmp_path, env)` ... `gw.stop()`, which returns the exit code).

Every wait is bounded; the process is stopped by its pid (SIGTERM, then SIGKILL after a timeout).
Its stdout/stderr go to `<run_dir>/logs/<name>.log` (JSON lines), read by `gw.log_text()`.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from devstack.gateway_proc import upstream_settings
from devstack.gateway_process import GatewayProcess, GatewayStartError
from devstack.stack_info import StackInfo

REPO_ROOT = Path(__file__).resolve().parent.parent
__all__ = ["REPO_ROOT", "GatewayProcess", "GatewayStartError", "running_gateway", "stack_env",
           "start_gateway"]


def stack_env(info: StackInfo, *, client: str = "gateway") -> dict[str, str]:
    """LAKEGATE__ settings wiring a gateway to a running devstack, logged in as `client`."""
    return {**upstream_settings(info, client=client),
            "LAKEGATE__TOKEN__AUDIENCE": info.idp.audience}


def start_gateway(
    run_dir: Path,
    env: Mapping[str, str],
    *,
    ready_timeout_s: float = 30.0,
    wait_ready: bool = True,
    name: str = "gateway",
) -> GatewayProcess:
    """Start `python -m gateway serve` from this checkout with `env` (LAKEGATE__ settings) on
    free ports; sockets are `<run_dir>/<name>-http.sock` / `-grpc.sock` unless `env` sets them.

    Raises:
        GatewayStartError: the process exited, or did not answer within the timeout.
    """
    gateway = GatewayProcess(run_dir, env, name=name, repo_root=REPO_ROOT)
    gateway.start(ready_timeout_s, ready=wait_ready)
    return gateway


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
