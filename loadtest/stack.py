"""The bench's own local stack (IdP, SeaweedFS, catalog emulator) and its own gateways.

The stack is started without a gateway; each scenario starts a gateway with the settings it
needs (compressed refresh windows for the soak, a fresh process so that its IdP grant is counted,
...) as a child process whose every thread is pinned to the server CPU set. Everything is
stopped by its own pid when the bench ends, even on error.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

from devstack.gateway_proc import upstream_settings
from devstack.gateway_process import GatewayProcess
from devstack.metrics_scrape import Samples, scrape
from devstack.stack_info import StackInfo
from loadtest.child import pin

_SEP = "\x1f"


@dataclass
class Gateway:
    """A gateway the bench started, with its listener addresses."""

    process: GatewayProcess
    http_tcp: str  # "127.0.0.1:port"
    http_uds: str  # "unix:/path"
    grpc_tcp: str
    grpc_uds: str  # "unix:/path" (gRPC target syntax)

    @property
    def http_url(self) -> str:
        return f"http://{self.http_tcp}"

    def metrics(self) -> Samples:
        """The gateway's Prometheus samples (read with `devstack.metrics_scrape.total`).

        Raises:
            RuntimeError: the gateway did not answer (a bench figure must not read as 0).
        """
        samples = scrape(self.http_url, timeout_s=10)
        if not samples:
            raise RuntimeError(f"no metrics from the gateway at {self.http_url}")
        return samples

    @property
    def pid(self) -> int:
        if self.process.pid is None:
            raise RuntimeError("the gateway is not running")
        return self.process.pid

    def stop(self) -> None:
        self.process.stop()


class BenchStack:
    """Starts/stops the stack in `run_dir` and the gateways of the scenarios."""

    def __init__(self, run_dir: Path, server_cpus: set[int] | None) -> None:
        self.run_dir = run_dir
        self.server_cpus = server_cpus
        self._info: StackInfo | None = None
        self._stack: Any = None
        self._gateways: list[Gateway] = []
        self._extra_records: list[Any] = []
        self._n = 0

    # ----- lifecycle -------------------------------------------------------------------
    def start(self, token_ttl_s: int = 3600) -> None:
        from devstack.launcher import start_stack

        self._stack = start_stack(self.run_dir, with_gateway=False, token_ttl_s=token_ttl_s)
        self._info = self._stack.info
        from devstack.hooks import EmulatorHooks, IdpHooks

        self.emulator = EmulatorHooks(self.info.catalog.url)
        self.idp = IdpHooks(self.info.idp.issuer)

    def stop(self) -> None:
        """Stop every gateway, any restarted process, then the stack (idempotent)."""
        for gw in self._gateways:
            gw.stop()
        self._gateways.clear()
        if self._extra_records:
            from devstack import processes

            for rec in self._extra_records:
                processes.stop(rec)
            self._extra_records.clear()
        from devstack.launcher import stop_stack

        stop_stack(self.run_dir)

    # ----- names -----------------------------------------------------------------------
    @property
    def info(self) -> StackInfo:
        if self._info is None:
            raise RuntimeError("the bench stack is not started")
        return self._info

    def native_path(self, table: str, access: str = "read") -> str:
        return (
            f"/v1/warehouses/{quote(self.info.warehouse.name, safe='')}/namespaces/"
            f"{quote(self.info.namespace, safe='')}/tables/{quote(table, safe='')}/credentials"
            f"?access={access}"
        )

    def aws_path(self, table: str, access: str = "read") -> str:
        return (
            f"/v1/aws-credentials/{quote(self.info.warehouse.name, safe='')}/"
            f"{quote(self.info.namespace, safe='')}/{quote(table, safe='')}?access={access}"
        )

    def catalog_load_path(self, table: str) -> str:
        return (
            f"/lakekeeper/v1/{self.info.warehouse.id}/namespaces/"
            f"{quote(self.info.namespace, safe='')}/generic-tables/{quote(table, safe='')}"
        )

    # ----- gateways --------------------------------------------------------------------
    def start_gateway(self, name: str, overrides: Mapping[str, str] | None = None) -> Gateway:
        """Start `python -m gateway serve` with the stack's env plus `overrides`, pinned."""

        self._n += 1
        tag = f"{name}-{self._n}"
        settings = {
            **upstream_settings(self.info),
            "LAKEGATE__LISTEN__HOST": "127.0.0.1",
            "LAKEGATE__CALLERS__MODE": "none",
            "LAKEGATE__LOG__LEVEL": "WARNING",
            **(overrides or {}),
        }
        process = GatewayProcess(self.run_dir / "gateways" / tag, settings, name="bench")
        eps = process.start(timeout_s=60)  # waits for /readyz
        gw = Gateway(
            process,
            eps.http_url.removeprefix("http://"),
            f"unix:{eps.http_uds}",
            eps.grpc_target,
            f"unix:{eps.grpc_uds}",
        )
        self._gateways.append(gw)
        if self.server_cpus:
            pin(gw.pid, self.server_cpus)
        return gw

    def stop_gateway(self, gw: Gateway) -> None:
        gw.stop()
        if gw in self._gateways:
            self._gateways.remove(gw)

    # ----- IdP outage ------------------------------------------------------------------
    def stop_idp(self) -> None:
        from devstack import processes

        rec = self._stack.records.get("idp") if not self._extra_records else self._extra_records[-1]
        processes.stop(rec)

    def restart_idp(self) -> None:
        """Start the IdP again on the same port and key (the stack keeps the key stable)."""
        from devstack import idp_config, processes

        rec = processes.spawn(
            "idp",
            idp_config.node_argv(self.run_dir / "idp.json"),
            log_path=self.run_dir / "logs" / "idp-restarted.log",
        )
        self._extra_records.append(rec)

    # ----- catalog helpers ---------------------------------------------------------------
    def admin_token(self) -> str:
        from devstack.bootstrap import fetch_token

        client = self.info.idp.clients["admin"]
        return str(fetch_token(self.info.idp.token_url, client.id, client.secret))

    def create_tables(self, names: list[str], concurrency: int = 32) -> float:
        """Create generic tables in the emulator (fast, concurrent); returns seconds taken."""
        t0 = time.monotonic()
        asyncio.run(self._create_tables(names, concurrency))
        return time.monotonic() - t0

    async def _create_tables(self, names: list[str], concurrency: int) -> None:
        import aiohttp

        token = self.admin_token()
        url = (
            f"{self.info.catalog.url}/lakekeeper/v1/{self.info.warehouse.id}/namespaces/"
            f"{quote(self.info.namespace, safe='')}/generic-tables"
        )
        sem = asyncio.Semaphore(concurrency)
        async with aiohttp.ClientSession(
            trust_env=False, headers={"Authorization": f"Bearer {token}"}
        ) as sess:

            async def create(name: str) -> None:
                async with sem:
                    async with sess.post(
                        url,
                        json={"name": name, "format": "parquet"},
                        timeout=aiohttp.ClientTimeout(total=60),
                    ) as resp:
                        if resp.status not in (200, 201, 409):
                            raise RuntimeError(
                                f"create {name}: HTTP {resp.status} {(await resp.text())[:200]}"
                            )

            await asyncio.gather(*(create(n) for n in names))


def catalog_calls(before: Mapping[str, int], after: Mapping[str, int]) -> int:
    """Upstream catalog calls between two emulator snapshots (every Lakekeeper operation,
    not STS, faults, auth failures or purges)."""
    skip = ("sts_", "faults_", "auth_", "purge", "health")
    return sum(
        max(0, int(after.get(k, 0)) - int(before.get(k, 0)))
        for k in after
        if not k.startswith(skip)
    )


def delta(before: Mapping[str, int], after: Mapping[str, int], key: str) -> int:
    return int(after.get(key, 0)) - int(before.get(key, 0))


def http_sample(url: str) -> bytes:
    """One real answer of a gateway route (with the anti-SSRF marker), e.g. a baseline's body."""
    import httpx

    resp = httpx.get(url, headers={"X-Lakegate-Request": "1"}, timeout=30, trust_env=False)
    resp.raise_for_status()
    return resp.content
