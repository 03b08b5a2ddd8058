"""The real local stack plus harness bookkeeping, shared by every suite.

Starts the devstack (IdP, SeaweedFS, catalog emulator) WITHOUT its gateway: each suite starts
its own gateway process with the settings it needs (upstream through the fault proxy, caller
auth on, short lifetimes). Knows how to kill -9 and restart each stack component the way it was
started, and collects every log directory for the secret scan.
"""

from __future__ import annotations

import json
import sys
import urllib.error
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlparse

from devstack.processes import ProcessTable, kill9, poll_until
from devstack.readiness import port_open
from devstack.stack_info import StackInfo
from hardening.processes import HarnessError, ProcessSpec, capture, respawn
from hardening.secret_scanner import SecretScanner

COMPONENTS = ("idp", "s3", "catalog")


@dataclass
class HarnessContext:
    """Everything a suite needs about the running stack."""

    repo_root: Path
    run_dir: Path
    info: StackInfo
    python: str = sys.executable
    procs: ProcessTable = field(default_factory=ProcessTable)
    specs: dict[str, ProcessSpec] = field(default_factory=dict)
    pids: dict[str, int] = field(default_factory=dict)
    scanner: SecretScanner = field(default_factory=SecretScanner)
    restarts: int = 0

    @property
    def stack_dir(self) -> Path:
        return self.run_dir / "stack"

    @property
    def warehouse(self) -> str:
        return self.info.warehouse.name

    @property
    def namespace(self) -> list[str]:
        return [self.info.namespace]

    @property
    def catalog_url(self) -> str:
        return self.info.catalog.url.rstrip("/")

    def component_port(self, name: str) -> tuple[str, int]:
        url = {
            "idp": self.info.idp.issuer,
            "s3": self.info.s3.endpoint,
            "catalog": self.catalog_url,
        }[name]
        parsed = urlparse(url)
        return parsed.hostname or "127.0.0.1", int(parsed.port or 80)

    def kill_component(self, name: str) -> None:
        """kill -9 one stack component (IdP, S3 or catalog)."""
        kill9(self.pids[name])
        self.procs.forget(self.pids[name])

    def restart_component(self, name: str, timeout_s: float = 30.0) -> float:
        """Start the component again from its captured argv/env; returns seconds until it
        listens."""
        self.restarts += 1
        record = respawn(
            self.procs, self.specs[name],
            self.run_dir / "logs" / f"{name}-restart-{self.restarts}.log",
        )
        self.pids[name] = record.pid
        host, port = self.component_port(name)
        waited = poll_until(lambda: port_open(host, port), timeout_s=timeout_s, interval_s=0.05)
        if waited is None:
            raise HarnessError(f"{name} did not listen on {port} within {timeout_s}s after restart")
        return waited

    def log_dirs(self) -> list[Path]:
        return [self.run_dir]

    def emulator_faults(self, body: Mapping[str, Any]) -> None:
        """POST /_emulator/faults (test hook of the emulator, not a Lakekeeper path)."""
        post_json(self.catalog_url + "/_emulator/faults", dict(body))


def start_environment(
    run_dir: Path, repo_root: Path, *, token_ttl_s: int = 3600, sts_validity_s: int = 3600
) -> HarnessContext:
    """Start the local stack without a gateway and capture how each component was started."""
    from devstack.launcher import start_stack

    run_dir.mkdir(parents=True, exist_ok=True)
    stack = start_stack(
        run_dir / "stack",
        with_gateway=False,
        token_ttl_s=token_ttl_s,
        sts_validity_s=sts_validity_s,
    )
    info = stack.info
    ctx = HarnessContext(repo_root=repo_root, run_dir=run_dir, info=info)
    for name in COMPONENTS:
        pid = int(info.pids[name])
        ctx.pids[name] = pid
        ctx.specs[name] = capture(name, pid)
    planted = [c.secret for c in info.idp.clients.values() if c.secret]
    planted.append(info.s3.admin_secret_key)
    ctx.scanner.add_planted(planted)
    return ctx


def stop_environment(ctx: HarnessContext) -> None:
    """Stop restarted components (by pid) and the stack (by its recorded pids)."""
    from devstack.launcher import stop_stack

    restarted = {record.pid for record in ctx.procs.started}
    ctx.procs.stop_all()
    try:
        stop_stack(ctx.stack_dir)
    finally:
        # A component restarted by us is not in the stack's pid file; make sure it is gone.
        for name, pid in ctx.pids.items():
            if pid in restarted:
                kill9(pid)
                _ = name


def gateway_settings(
    ctx: HarnessContext, *, upstream_url: str | None = None, **overrides: str
) -> dict[str, str]:
    """`LAKEGATE__*` settings for a gateway on this stack (OAuth2 client credentials, as in
    production)."""
    idp = ctx.info.idp
    client = idp.clients["gateway"]
    env = {
        "LAKEGATE__UPSTREAM__URL": upstream_url or ctx.catalog_url,
        "LAKEGATE__TOKEN__KIND": "client_credentials",
        "LAKEGATE__TOKEN__TOKEN_URL": idp.token_url,
        "LAKEGATE__TOKEN__CLIENT_ID": client.id,
        "LAKEGATE__TOKEN__CLIENT_SECRET": client.secret,
        "LAKEGATE__LOG__FORMAT": "json",
        "LAKEGATE__LOG__LEVEL": "DEBUG",  # more log paths for the secret scan to check
    }
    roles = ctx.info.catalog.roles
    if roles.get("read"):
        env["LAKEGATE__UPSTREAM__READ_ROLE_ID"] = str(roles["read"])
    if roles.get("write"):
        env["LAKEGATE__UPSTREAM__WRITE_ROLE_ID"] = str(roles["write"])
    env.update(
        {
            k if k.startswith("LAKEGATE__") else "LAKEGATE__" + k.upper(): v
            for k, v in overrides.items()
        }
    )
    return env


def native_path(
    warehouse: str, namespace: list[str], table: str | None = None, suffix: str = ""
) -> str:
    """A native `/v1` path with every segment percent-encoded (namespace levels joined by %1F)."""
    ns = quote("\x1f".join(namespace), safe="")
    path = f"/v1/warehouses/{quote(warehouse, safe='')}/namespaces/{ns}/tables"
    if table is not None:
        path += "/" + quote(table, safe="")
    return path + suffix


def request_json(
    method: str,
    url: str,
    body: Mapping[str, Any] | None = None,
    *,
    token: str | None = None,
    timeout_s: float = 15.0,
    marker: bool = True,
) -> tuple[int, Any]:
    """One blocking JSON request (harness control path, not load): returns (status, parsed body)."""
    headers = {"Content-Type": "application/json"}
    if marker:
        headers["X-Lakegate-Request"] = "1"
    if token:
        headers["Authorization"] = f"Bearer {token}"
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, method=method, headers=headers)  # noqa: S310 - loopback
    try:
        with urllib.request.urlopen(req, timeout=timeout_s) as resp:  # noqa: S310
            raw = resp.read()
            status = resp.status
    except urllib.error.HTTPError as exc:
        raw = exc.read()
        status = exc.code
    try:
        return status, json.loads(raw) if raw else None
    except ValueError:
        return status, raw.decode(errors="replace")


def post_json(url: str, body: Mapping[str, Any]) -> Any:
    status, parsed = request_json("POST", url, body, marker=False)
    if status >= 300:
        raise HarnessError(f"POST {url} -> {status}")
    return parsed


def ensure_tables(
    http_url: str, warehouse: str, namespace: list[str], names: list[str], token: str | None = None
) -> None:
    """Create generic tables through the gateway (409 = already there)."""
    for name in names:
        status, body = request_json(
            "POST",
            http_url + native_path(warehouse, namespace),
            {"name": name, "format": "parquet"},
            token=token,
        )
        if status not in (200, 201, 409):
            raise HarnessError(f"creating table {name} -> {status}: {str(body)[:200]}")
