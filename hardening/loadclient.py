"""A steady-load client process: asks the gateway for credentials and audits every answer.

Run as `python -m hardening.loadclient --config <json>`; writes a JSON result file at exit.
Several of these run at once during a fault so the gateway sees real independent processes.
Every served credential is checked against the wall clock: expired or below the serve floor
is counted (the harness requires both to be 0). The audit uses the credential's own expiry
keys as well as the gateway's summary field, so a gateway that mislabels expiry is caught.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import signal
import time
from dataclasses import asdict, dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any
from urllib.parse import quote

import aiohttp

EXPIRY_KEYS = ("s3.session-token-expires-at-ms", "expiration-time", "gcs.oauth2.token-expires-at")
SECRET_KEYS = ("s3.access-key-id", "s3.secret-access-key", "s3.session-token")
_MAX_ERROR_TIMES = 20000
_MAX_PLANTED = 64


@dataclass(frozen=True)
class LoadConfig:
    """What one client process does (serialised as JSON on the command line)."""

    surface: str  # http | uds | aws | grpc
    warehouse: str
    namespace: list[str]
    tables: list[str]
    out: str
    http_url: str = ""
    uds: str = ""
    grpc_target: str = ""
    token: str | None = None
    access: str = "read"
    floor_s: float = 300.0
    tolerance_s: float = 2.0
    duration_s: float = 60.0
    concurrency: int = 4
    pace_s: float = 0.02
    timeout_s: float = 10.0
    stop_file: str = ""


@dataclass
class LoadStats:
    """Result of one client process."""

    surface: str
    requests: int = 0
    ok: int = 0
    errors: int = 0
    errors_by_kind: dict[str, int] = field(default_factory=dict)
    expired: int = 0
    below_floor: int = 0
    no_expiry: int = 0
    min_remaining_s: float | None = None
    # What the gateway itself claimed (`remaining_s`) on the answer with the least real remaining:
    # tells serve-time floor breaches apart from time spent in transit.
    min_remaining_claimed_s: float | None = None
    error_times: list[float] = field(default_factory=list)
    started: float = 0.0
    finished: float = 0.0
    planted: list[str] = field(default_factory=list)

    def error(self, kind: str, at: float) -> None:
        kind = f"{self.surface}:{kind}"
        self.errors += 1
        self.errors_by_kind[kind] = self.errors_by_kind.get(kind, 0) + 1
        if len(self.error_times) < _MAX_ERROR_TIMES:
            self.error_times.append(at)

    def served(
        self,
        expires_at_ms: list[int],
        at: float,
        floor_s: float,
        tolerance_s: float,
        claimed_s: float | None = None,
    ) -> None:
        self.ok += 1
        known = [e for e in expires_at_ms if e > 0]
        if not known:
            self.no_expiry += 1
            return
        remaining_s = min(known) / 1000.0 - at
        if self.min_remaining_s is None or remaining_s < self.min_remaining_s:
            self.min_remaining_s = remaining_s
            self.min_remaining_claimed_s = claimed_s
        if remaining_s <= 0:
            self.expired += 1
        elif remaining_s < floor_s - tolerance_s:
            self.below_floor += 1

    def remember(self, config: dict[str, str]) -> None:
        if len(self.planted) >= _MAX_PLANTED:
            return
        for key in SECRET_KEYS:
            value = config.get(key)
            if value and value not in self.planted:
                self.planted.append(value)


def expiries_from_credentials(
    credentials: list[dict[str, Any]], top_level_ms: int | None
) -> list[int]:
    """All expiry instants (epoch ms) a response claims, from both summary and credential keys."""
    out: list[int] = []
    if top_level_ms:
        out.append(int(top_level_ms))
    for cred in credentials:
        if cred.get("expires_at_ms"):
            out.append(int(cred["expires_at_ms"]))
        config = cred.get("config") or {}
        for key, value in config.items():
            if key in EXPIRY_KEYS or key.startswith("adls.sas-token-expires-at-ms."):
                try:
                    out.append(int(value))
                except (TypeError, ValueError):
                    continue
    return out


def aws_expiry_ms(body: dict[str, Any]) -> list[int]:
    """AWS container-credentials `Expiration` (ISO 8601) as epoch ms."""
    raw = body.get("Expiration")
    if not isinstance(raw, str):
        return []
    return [int(datetime.fromisoformat(raw.replace("Z", "+00:00")).timestamp() * 1000)]


class _Runner:
    def __init__(self, cfg: LoadConfig) -> None:
        self.cfg = cfg
        self.stats = LoadStats(surface=cfg.surface)
        self.stop = asyncio.Event()

    def _headers(self) -> dict[str, str]:
        headers = {"X-Lakegate-Request": "1"}
        if self.cfg.token:
            headers["Authorization"] = f"Bearer {self.cfg.token}"
        return headers

    def _path(self, table: str) -> str:
        wh = quote(self.cfg.warehouse, safe="")
        ns = quote("\x1f".join(self.cfg.namespace), safe="")
        tb = quote(table, safe="")
        if self.cfg.surface == "aws":
            return f"/v1/aws-credentials/{wh}/{ns}/{tb}?access={self.cfg.access}"
        return (
            f"/v1/warehouses/{wh}/namespaces/{ns}/tables/{tb}/credentials?access={self.cfg.access}"
        )

    async def run(self) -> LoadStats:
        self.stats.started = time.time()
        deadline = time.monotonic() + self.cfg.duration_s
        if self.cfg.surface == "grpc":
            workers = [self._grpc_worker(i, deadline) for i in range(self.cfg.concurrency)]
            await asyncio.gather(*workers)
        else:
            connector: aiohttp.BaseConnector
            if self.cfg.surface == "uds":
                connector = aiohttp.UnixConnector(path=self.cfg.uds)
                base = "http://localhost"
            else:
                connector = aiohttp.TCPConnector(limit=self.cfg.concurrency)
                base = self.cfg.http_url.rstrip("/")
            timeout = aiohttp.ClientTimeout(total=self.cfg.timeout_s)
            async with aiohttp.ClientSession(connector=connector, timeout=timeout) as session:
                workers = [
                    self._http_worker(session, base, i, deadline)
                    for i in range(self.cfg.concurrency)
                ]
                await asyncio.gather(*workers)
        self.stats.finished = time.time()
        return self.stats

    def _should_stop(self, deadline: float) -> bool:
        if self.stop.is_set() or time.monotonic() >= deadline:
            return True
        return bool(self.cfg.stop_file) and Path(self.cfg.stop_file).exists()

    async def _pace(self) -> None:
        try:
            async with asyncio.timeout(self.cfg.pace_s):
                await self.stop.wait()
        except TimeoutError:
            pass

    async def _http_worker(
        self, session: aiohttp.ClientSession, base: str, index: int, deadline: float
    ) -> None:
        n = index
        while not self._should_stop(deadline):
            table = self.cfg.tables[n % len(self.cfg.tables)]
            n += 1
            self.stats.requests += 1
            try:
                async with session.get(base + self._path(table), headers=self._headers()) as resp:
                    body = await resp.read()
                    now = time.time()
                    if resp.status != 200:
                        self.stats.error(f"http_{resp.status}", now)
                    else:
                        self._audit_json(json.loads(body), now)
            except (aiohttp.ClientError, TimeoutError, OSError, ValueError) as exc:
                self.stats.error(type(exc).__name__, time.time())
            await self._pace()

    def _audit_json(self, body: dict[str, Any], now: float) -> None:
        if self.cfg.surface == "aws":
            self.stats.served(aws_expiry_ms(body), now, self.cfg.floor_s, self.cfg.tolerance_s)
            self.stats.remember(
                {
                    "s3.access-key-id": str(body.get("AccessKeyId", "")),
                    "s3.secret-access-key": str(body.get("SecretAccessKey", "")),
                    "s3.session-token": str(body.get("Token", "")),
                }
            )
            return
        creds = body.get("credentials") or []
        self.stats.served(
            expiries_from_credentials(creds, body.get("expires_at_ms")),
            now,
            self.cfg.floor_s,
            self.cfg.tolerance_s,
            body.get("remaining_s"),
        )
        for cred in creds:
            self.stats.remember(cred.get("config") or {})

    async def _grpc_worker(self, index: int, deadline: float) -> None:
        import grpc

        from lakegate.v1 import common_pb2, credentials_pb2, credentials_pb2_grpc

        metadata = (("authorization", f"Bearer {self.cfg.token}"),) if self.cfg.token else ()
        access = (
            common_pb2.ACCESS_MODE_WRITE
            if self.cfg.access == "write"
            else common_pb2.ACCESS_MODE_READ
        )
        async with grpc.aio.insecure_channel(self.cfg.grpc_target) as channel:
            stub = credentials_pb2_grpc.CredentialServiceStub(channel)
            n = index
            while not self._should_stop(deadline):
                table = self.cfg.tables[n % len(self.cfg.tables)]
                n += 1
                self.stats.requests += 1
                request = credentials_pb2.GetTableCredentialsRequest(
                    table=common_pb2.TableRef(
                        warehouse=self.cfg.warehouse, namespace=self.cfg.namespace, name=table
                    ),
                    access=access,
                )
                try:
                    resp = await stub.GetTableCredentials(
                        request, metadata=metadata, timeout=self.cfg.timeout_s
                    )
                    now = time.time()
                    creds = [
                        {"expires_at_ms": c.expires_at_ms, "config": dict(c.config)}
                        for c in resp.credentials
                    ]
                    self.stats.served(
                        expiries_from_credentials(creds, resp.expires_at_ms),
                        now,
                        self.cfg.floor_s,
                        self.cfg.tolerance_s,
                        resp.remaining_seconds,
                    )
                    for c in creds:
                        self.stats.remember(c["config"])
                except grpc.aio.AioRpcError as exc:
                    self.stats.error(f"grpc_{exc.code().name}", time.time())
                await self._pace()


async def _main(cfg: LoadConfig) -> LoadStats:
    runner = _Runner(cfg)
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, runner.stop.set)
    return await runner.run()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m hardening.loadclient")
    parser.add_argument("--config", required=True, help="LoadConfig as JSON")
    args = parser.parse_args(argv)
    cfg = LoadConfig(**json.loads(args.config))
    stats = asyncio.run(_main(cfg))
    Path(cfg.out).write_text(json.dumps(asdict(stats)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
