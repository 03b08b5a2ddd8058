"""The stack's own gateway (and each Spark node's): `python -m gateway serve` through the one
GatewayProcess, logged in to the stack's IdP as the `gateway` client with the catalog's roles
(the settings of docs/contracts.md §3).
"""

from __future__ import annotations

import importlib.util
from collections.abc import Mapping
from pathlib import Path

from devstack.gateway_process import GatewayProcess
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


def events_settings(info: StackInfo) -> dict[str, str]:
    """`LAKEGATE__EVENTS__*` settings subscribing a gateway to the stack catalog's change events
    (empty when the stack runs without NATS)."""
    if info.nats is None:
        return {}
    return {"LAKEGATE__EVENTS__NATS_ADDRESS": info.nats.url,
            "LAKEGATE__EVENTS__NATS_TOPIC": info.nats.subject}


def start_gateway(
    run_dir: Path,
    info: StackInfo,
    *,
    extra_env: Mapping[str, str] | None = None,
    timeout_s: float = 60.0,
) -> tuple[ProcessRecord, GatewayInfo]:
    """Start the stack's gateway in `run_dir` and wait (bounded) until `/readyz` answers.

    Free TCP ports on loopback, the sockets `lakegate-http.sock` / `lakegate-grpc.sock`, callers
    mode `none`, its log in `logs/gateway.log`; `extra_env` (e.g.
    `LAKEGATE__CACHE__REFRESH_LEAD_S`) overrides these. Returns (record, stack.json `gateway`).

    Raises:
        GatewayStartError: the gateway exited or did not become ready (with its log tail).
    """
    settings = {
        **upstream_settings(info),
        **events_settings(info),
        "LAKEGATE__LISTEN__HOST": "127.0.0.1",
        "LAKEGATE__LISTEN__HTTP_UDS": str(run_dir / "lakegate-http.sock"),
        "LAKEGATE__LISTEN__GRPC_UDS": str(run_dir / "lakegate-grpc.sock"),
        "LAKEGATE__CALLERS__MODE": "none",
        **(extra_env or {}),
    }
    process = GatewayProcess(run_dir, settings, name="gateway")
    eps = process.start(timeout_s)
    assert process.record is not None  # started
    return process.record, GatewayInfo(
        http_url=eps.http_url, grpc_target=eps.grpc_target, uds=eps.http_uds,
        grpc_uds=eps.grpc_uds,
    )
