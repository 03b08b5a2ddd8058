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

from devstack.gateway_process import GatewayProcess, GatewayStartError

REPO_ROOT = Path(__file__).resolve().parent.parent
__all__ = ["REPO_ROOT", "GatewayProcess", "GatewayStartError", "running_gateway", "stack_env",
           "start_gateway"]


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
