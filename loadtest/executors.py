"""Simulated Spark executors asking for table credentials, through the gateway or directly.

Each simulated executor loops: pick a table by a skewed (Zipf) popularity, ask for its
credentials, "work" for `think_s`, repeat, until the run's time or request cap.
- gateway mode: one keep-alive connection per executor to the gateway's native HTTP API (UDS),
  as every executor process on a node would hold; answers are parsed for `outcome` and
  `expires_at_ms` when `parse` is set (to check the serve floor and misses after warm-up).
- direct mode: what pylakekeeper does per executor: its own OAuth2 client-credentials grant
  (client_secret_post form, re-fetched 60 s before `expires_in`) and a vended `load` call on the
  catalog for every request. Implemented with aiohttp for speed (never httpx's async client).
- direct_memo mode: the strongest baseline a careful user builds without a gateway: direct, plus
  a per-executor memo of each table's vended credential, reused until its remaining lifetime
  falls below the serve floor (`floor_s`), as the gateway itself does.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import time
from dataclasses import dataclass, replace
from multiprocessing.synchronize import Event
from typing import Any, Literal

import aiohttp

from loadtest.loadgen import open_connections
from loadtest.rawhttp import RawHttpConnection, RawHttpError
from loadtest.spec import LoadResult

_CALL_TIMEOUT_S = 30.0

ExecutorMode = Literal["gateway", "direct", "direct_memo"]


def zipf_weights(n: int, s: float = 1.1) -> list[float]:
    """Popularity of n tables: weight of rank k is 1 / k**s (rank 1 is the hottest)."""
    return [1.0 / (k**s) for k in range(1, n + 1)]


@dataclass(frozen=True)
class ExecutorSpec:
    """One executor-simulation run (or one process's share of it)."""

    mode: ExecutorMode
    target: str  # gateway: "unix:/path" (HTTP); direct: catalog base URL "http://127.0.0.1:P"
    paths: tuple[str, ...]  # one request path per table
    weights: tuple[float, ...]
    executors: int
    duration_s: float
    max_requests: int
    think_s: float = 0.0
    warmup_s: float = 0.0
    parse: bool = False
    token_url: str = ""
    client_id: str = ""
    client_secret: str = ""
    processes: int = 1
    cpus: tuple[int, ...] | None = None
    seed: int = 7
    # gateway mode: several gateways ("nodes"); the executors are spread evenly over them
    targets: tuple[str, ...] = ()
    # direct_memo mode: a memoized credential is reused while it has more than this left
    floor_s: float = 0.0

    def share(self, index: int) -> ExecutorSpec:
        n = self.processes
        return replace(
            self,
            executors=self.executors // n + (1 if index < self.executors % n else 0),
            max_requests=max(
                1, self.max_requests // n + (1 if index < self.max_requests % n else 0)
            ),
            processes=1,
            seed=self.seed * 1000 + index,
        )


@dataclass
class ExecutorResult(LoadResult):
    """Counts of one run (merged over processes); `outcomes` counts only after the warm-up."""

    token_requests: int = 0
    min_remaining_s: float = float("inf")
    memo_hits: int = 0  # direct_memo: requests answered from the executor's own memo

    @property
    def outcomes_after_warmup(self) -> dict[str, int]:
        """The name the soak and outage reports give `outcomes`."""
        return self.outcomes

    def merge(self, other: LoadResult) -> None:
        super().merge(other)
        if isinstance(other, ExecutorResult):
            self.memo_hits += other.memo_hits
            self.token_requests += other.token_requests
            self.min_remaining_s = min(self.min_remaining_s, other.min_remaining_s)

    def note_error(self, text: str) -> None:
        self.errors += 1
        if len(self.error_samples) < 5:
            self.error_samples.append(text[:200])


def run_executors(spec: ExecutorSpec) -> ExecutorResult:
    """Run the simulation in `spec.processes` processes and merge the results."""
    from loadtest.workers import run_processes

    merged = ExecutorResult()
    shares = [spec.share(i) for i in range(spec.processes)]
    for part in run_processes(executor_worker, shares, spec.duration_s):
        merged.merge(part)
    return merged


def executor_worker(spec: ExecutorSpec, gate: Event, results: Any) -> None:
    """Worker process entry (module level for spawn)."""
    if spec.cpus:
        os.sched_setaffinity(0, spec.cpus)
    try:
        import uvloop

        results.put(("ok", uvloop.run(_simulate(spec, gate, results))))
    except BaseException as exc:
        results.put(("error", f"{type(exc).__name__}: {str(exc)[:300]}"))
        raise


async def _simulate(spec: ExecutorSpec, gate: Event, results: Any) -> ExecutorResult:
    result = ExecutorResult()
    rng = random.Random(spec.seed)  # noqa: S311 - workload simulation, not cryptography
    if spec.mode == "gateway":
        conns: list[tuple[RawHttpConnection, str]] = []
        targets = spec.targets or (spec.target,)
        for i, target in enumerate(targets):
            n = spec.executors // len(targets) + (1 if i < spec.executors % len(targets) else 0)
            conns += [(c, target) for c in await open_connections(target, n)]
        requests = [
            (f"GET {p} HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Lakegate-Request: 1\r\n\r\n").encode()
            for p in spec.paths
        ]
        session = None
    else:
        conns = []
        requests = []
        session = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0), trust_env=False)
    results.put(("ready", None))
    if not gate.wait(timeout=90):
        raise RuntimeError("start gate never opened")
    start = time.perf_counter()
    stop_at = start + spec.duration_s
    warm_until = start + spec.warmup_s

    async def gateway_executor(conn: RawHttpConnection, target: str, seed: int) -> None:
        local = random.Random(seed)  # noqa: S311 - workload simulation
        while time.perf_counter() < stop_at and result.requests + result.errors < spec.max_requests:
            idx = local.choices(range(len(requests)), weights=spec.weights)[0]
            t0 = time.perf_counter()
            try:
                async with asyncio.timeout(_CALL_TIMEOUT_S):
                    if conn.closed:
                        conn = await RawHttpConnection.open(target)
                    status, body = await conn.request(requests[idx])
            except (RawHttpError, OSError, TimeoutError) as exc:
                conn.close()
                result.note_error(f"{type(exc).__name__}: {exc}")
                continue
            if status != 200:
                result.note_error(f"HTTP {status}: {body[:150]!r}")
                continue
            result.requests += 1
            result.hist.record_s(time.perf_counter() - t0)
            if spec.parse:
                _account(result, body, t0 >= warm_until)
            if spec.think_s > 0:
                await asyncio.sleep(spec.think_s)

    async def direct_executor(seed: int) -> None:
        assert session is not None
        local = random.Random(seed)  # noqa: S311 - workload simulation
        token = ""
        token_valid_until = 0.0
        memo: dict[int, float] = {}  # table index -> credential expiry (epoch s)
        while time.perf_counter() < stop_at and result.requests + result.errors < spec.max_requests:
            idx = local.choices(range(len(spec.paths)), weights=spec.weights)[0]
            t0 = time.perf_counter()
            if memo.get(idx, 0.0) - time.time() > spec.floor_s:
                result.requests += 1
                result.memo_hits += 1
                result.hist.record_s(time.perf_counter() - t0)
                if spec.think_s > 0:
                    await asyncio.sleep(spec.think_s)
                continue
            try:
                async with asyncio.timeout(_CALL_TIMEOUT_S):
                    if time.monotonic() >= token_valid_until:
                        token, expires_in = await _grant(session, spec)
                        result.token_requests += 1
                        token_valid_until = time.monotonic() + expires_in - 60.0
                    async with session.get(
                        spec.target + spec.paths[idx],
                        headers={
                            "Authorization": f"Bearer {token}",
                            "X-Iceberg-Access-Delegation": "vended-credentials",
                        },
                    ) as resp:
                        body = await resp.read()
                        status = resp.status
            except (aiohttp.ClientError, OSError, TimeoutError, RuntimeError, ValueError) as exc:
                result.note_error(f"{type(exc).__name__}: {exc}")
                continue
            if status == 401:
                token_valid_until = 0.0  # pylakekeeper: invalidate and fetch again
            if status != 200:
                result.note_error(f"HTTP {status}: {body[:150]!r}")
                continue
            result.requests += 1
            result.hist.record_s(time.perf_counter() - t0)
            if spec.mode == "direct_memo":
                expires_s = vended_expiry_s(body)
                if expires_s is not None:
                    memo[idx] = expires_s
            if spec.think_s > 0:
                await asyncio.sleep(spec.think_s)

    try:
        if spec.mode == "gateway":
            await asyncio.gather(
                *(gateway_executor(c, t, rng.randrange(1 << 30)) for c, t in conns)
            )
        else:
            await asyncio.gather(
                *(direct_executor(rng.randrange(1 << 30)) for _ in range(spec.executors))
            )
    finally:
        for conn, _ in conns:
            conn.close()
        if session is not None:
            await session.close()
    result.elapsed_s = min(time.perf_counter(), stop_at) - start
    return result


async def _grant(session: Any, spec: ExecutorSpec) -> tuple[str, float]:
    form = {
        "grant_type": "client_credentials",
        "client_id": spec.client_id,
        "client_secret": spec.client_secret,
    }
    async with session.post(spec.token_url, data=form) as resp:
        if resp.status != 200:
            raise RuntimeError(f"token endpoint returned HTTP {resp.status}")
        doc = await resp.json()
    return str(doc["access_token"]), float(doc.get("expires_in", 300))


def vended_expiry_s(body: bytes) -> float | None:
    """The earliest `s3.session-token-expires-at-ms` of a vended load answer, in epoch seconds
    (None when the answer carries no expiry: such a credential is not memoized)."""
    try:
        doc = json.loads(body)
        stamps = [
            float(cred["config"]["s3.session-token-expires-at-ms"])
            for cred in doc.get("storage-credentials") or ()
            if "s3.session-token-expires-at-ms" in cred.get("config", {})
        ]
    except (ValueError, TypeError, KeyError, AttributeError):
        return None
    return min(stamps) / 1000.0 if stamps else None


def _account(result: ExecutorResult, body: bytes, after_warmup: bool) -> None:
    doc = json.loads(body)
    remaining = float(doc["expires_at_ms"]) / 1000.0 - time.time()
    result.min_remaining_s = min(result.min_remaining_s, remaining)
    if after_warmup:
        outcome = str(doc.get("outcome", "?"))
        result.outcomes[outcome] = result.outcomes.get(outcome, 0) + 1
