"""Start the Lakegate gateway against the stack (`<venv python> -m gateway serve`, env of
docs/contracts.md §3): client-credentials login as the `gateway` client, read/write roles,
free TCP ports plus UDS in the run directory, callers mode `none`, log in the run directory.
"""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Mapping
from pathlib import Path

from devstack import processes
from devstack.ports import free_ports
from devstack.processes import ProcessRecord
from devstack.stack_info import GatewayInfo, StackInfo


def gateway_available() -> bool:
    """True once the gateway package has an app module (it is built in parallel)."""
    try:
        return importlib.util.find_spec("gateway.app") is not None
    except ModuleNotFoundError:
        return False


def upstream_settings(info: StackInfo, *, client: str = "gateway") -> dict[str, str]:
    """`LAKEGATE__*` settings wiring a gateway to this stack's catalog, logged in to its IdP as
    `client` (OAuth2 client credentials, as in production) with the catalog's two roles."""
    creds = info.idp.clients[client]
    return {
        "LAKEGATE__UPSTREAM__URL": info.catalog.url,
        "LAKEGATE__UPSTREAM__READ_ROLE_ID": info.catalog.roles["read"],
        "LAKEGATE__UPSTREAM__WRITE_ROLE_ID": info.catalog.roles["write"],
        "LAKEGATE__TOKEN__KIND": "client_credentials",
        "LAKEGATE__TOKEN__TOKEN_URL": info.idp.token_url,
        "LAKEGATE__TOKEN__CLIENT_ID": creds.id,
        "LAKEGATE__TOKEN__CLIENT_SECRET": creds.secret,
    }


def gateway_env(
    run_dir: Path, info: StackInfo, http_port: int, grpc_port: int
) -> dict[str, str]:
    return {
        **upstream_settings(info),
        "LAKEGATE__LISTEN__HOST": "127.0.0.1",
        "LAKEGATE__LISTEN__HTTP_PORT": str(http_port),
        "LAKEGATE__LISTEN__GRPC_PORT": str(grpc_port),
        "LAKEGATE__LISTEN__HTTP_UDS": str(run_dir / "lakegate-http.sock"),
        "LAKEGATE__LISTEN__GRPC_UDS": str(run_dir / "lakegate-grpc.sock"),
        "LAKEGATE__CALLERS__MODE": "none",
    }


def start_gateway(
    run_dir: Path, info: StackInfo, *, extra_env: Mapping[str, str] | None = None
) -> tuple[ProcessRecord, GatewayInfo]:
    """Spawn the gateway; the caller waits for `/readyz`. Returns (record, stack.json `gateway`).

    `extra_env` (e.g. `LAKEGATE__CACHE__REFRESH_LEAD_S`) overrides the stack's settings.
    """
    http_port, grpc_port = free_ports(2)
    env = gateway_env(run_dir, info, http_port, grpc_port)
    env.update(extra_env or {})
    env["PYTHONUNBUFFERED"] = "1"
    record = processes.spawn(
        "gateway",
        [sys.executable, "-m", "gateway", "serve"],
        log_path=run_dir / "logs" / "gateway.log",
        env_extra=env,
    )
    gw_info = GatewayInfo(
        http_url=f"http://127.0.0.1:{http_port}",
        grpc_target=f"127.0.0.1:{grpc_port}",
        uds=str(run_dir / "lakegate-http.sock"),
        grpc_uds=str(run_dir / "lakegate-grpc.sock"),
    )
    return record, gw_info
