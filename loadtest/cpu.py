"""Server CPU per request, in process: the gateway's HTTP surfaces against the trivial server.

`python -m loadtest.cpu [--requests N] [--rounds R] [--concurrency 1,16] [--profile SURFACE]`

Why: on a shared 2-core machine a throughput ratio moves with the neighbours (issue #36). The
CPU time the serving thread spends per request does not: under concurrency the gateway's core
is saturated, so the throughput ratio is about the trivial server's CPU per request over the
gateway's. This tool serves, in this process and on one uvloop loop, the real App (real
surfaces and service, audit and metrics as configured; the catalog is the tests' in-memory fake
Lakekeeper, asked once per table) and the trivial aiohttp app of `loadtest/baselines.py`
answering a copy of the gateway's own answer. A child process drives closed loops of the
bench's own request bytes (`loadtest.rawhttp`), gateway and trivial server alternately
(A B A B ...), and `time.thread_time()` of the serving thread over each run divided by its
requests is one sample; each side's best of the rounds is reported (the least disturbed).
The ratio trivial / gateway is what a saturated core's throughput ratio tends to.

`--profile http|uds|aws` instead profiles the gateway alone and prints its top frames: py-spy
sampling this process (default; idle samples dropped) or `--profiler cprofile` (every call,
timed by thread CPU; it inflates small calls: use it to count calls, not to time).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import cProfile
import json
import os
import pstats
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from loadtest.rawhttp import RawHttpConnection, build_request

WAREHOUSE, NAMESPACE, TABLE = "demo", "demo_ns", "orders"
NATIVE_PATH = (f"/v1/warehouses/{WAREHOUSE}/namespaces/{NAMESPACE}/tables/{TABLE}/credentials"
               "?access=read")
AWS_PATH = f"/v1/aws-credentials/{WAREHOUSE}/{NAMESPACE}/{TABLE}?access=read"
MARK = {"X-Lakegate-Request": "1"}  # the bench's headers (loadtest/scenarios/surfaces.py)
_CLIENT_TIMEOUT_S = 120.0
_SAMPLE_S = 15.0  # the least py-spy window of `--profile`: ~3,000 samples


@dataclass(frozen=True)
class Surface:
    """One HTTP surface: its transport and path (the trivial server is asked the same)."""

    name: str
    uds: bool
    path: str


SURFACES = (Surface("http", False, NATIVE_PATH), Surface("uds", True, NATIVE_PATH),
            Surface("aws", False, AWS_PATH))


# ------------------------------------------------------------------ the client (child process)
async def _closed_loop(target: str, request: bytes, concurrency: int, n: int) -> int:
    """`n` requests over `concurrency` keep-alive connections; the count of non-200s."""
    conns = [await RawHttpConnection.open(target) for _ in range(concurrency)]
    left = n
    bad = 0

    async def user(conn: RawHttpConnection) -> None:
        nonlocal left, bad
        while left > 0:
            left -= 1
            status, _ = await conn.request(request)
            bad += status != 200

    try:
        await asyncio.gather(*(user(c) for c in conns))
    finally:
        for conn in conns:
            conn.close()
    return bad


async def _client() -> None:
    """Read `target concurrency n path` lines, run each closed loop, answer `ok <bad>`."""
    loop = asyncio.get_running_loop()
    while True:
        line = await loop.run_in_executor(None, sys.stdin.readline)
        if not line.strip():
            return
        target, conc, n, path = line.split()
        bad = await _closed_loop(target, build_request("GET", path, MARK), int(conc), int(n))
        sys.stdout.write(f"ok {bad}\n")
        sys.stdout.flush()


# ------------------------------------------------------------------ the servers (this process)
class Driver:
    """The client child process, one closed loop per `run`."""

    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        self._proc = proc

    async def run(self, target: str, concurrency: int, n: int, path: str) -> None:
        assert self._proc.stdin is not None
        assert self._proc.stdout is not None
        self._proc.stdin.write(f"{target} {concurrency} {n} {path}\n".encode())
        await self._proc.stdin.drain()
        answer = await asyncio.wait_for(self._proc.stdout.readline(), _CLIENT_TIMEOUT_S)
        if not answer.startswith(b"ok 0"):
            raise RuntimeError(f"client: {answer.decode(errors='replace').strip() or 'died'}")


@contextlib.asynccontextmanager
async def driver() -> AsyncIterator[Driver]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "loadtest.cpu", "--client",
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE)
    try:
        yield Driver(proc)
    finally:
        assert proc.stdin is not None
        proc.stdin.close()
        try:
            await asyncio.wait_for(proc.wait(), 10)
        except TimeoutError:
            proc.kill()
            await proc.wait()


@contextlib.asynccontextmanager
async def gateway(tmp: Path) -> AsyncIterator[dict[str, str]]:
    """The real App over the in-memory fake catalog; its targets by surface name."""
    from gateway.app import App
    from gateway.service import build_core
    from gateway.settings import Settings
    from tests.fakes.catalog import CATALOG_URL, FakeCatalog
    from tests.fakes.clock import FakeClock

    catalog = FakeCatalog(FakeClock(wall=time.time()), credential_lifetime_s=3600)
    catalog.add_table((NAMESPACE,), TABLE)
    settings = Settings.load(environ={
        "LAKEGATE__UPSTREAM__URL": CATALOG_URL,
        "LAKEGATE__TOKEN__KIND": "none",
        "LAKEGATE__LISTEN__HOST": "127.0.0.1",
        "LAKEGATE__LISTEN__HTTP_PORT": "0",
        "LAKEGATE__LISTEN__GRPC_PORT": "0",
        "LAKEGATE__LISTEN__HTTP_UDS": str(tmp / "http.sock"),
        "LAKEGATE__LISTEN__GRPC_UDS": str(tmp / "grpc.sock"),
        "LAKEGATE__CALLERS__MODE": "none",
        "LAKEGATE__LOG__LEVEL": "WARNING",
        **{k: v for k, v in os.environ.items() if k.startswith("LAKEGATE__")},
    })
    app = App(settings, freeze_gc=True,
              core_factory=lambda s, m, spawn: build_core(s, m, spawn,
                                                         transport=catalog.transport()))
    await app.start()
    try:
        yield {"http": f"127.0.0.1:{app.http_port}", "uds": f"unix:{tmp / 'http.sock'}"}
    finally:
        await app.shutdown()


@contextlib.asynccontextmanager
async def trivial(tmp: Path, http_body: bytes, aws_body: bytes) -> AsyncIterator[dict[str, str]]:
    """The bench's trivial aiohttp server (loadtest/baselines.py), on TCP and UDS."""
    from aiohttp import web

    from loadtest.baselines import http_app

    runner = web.AppRunner(http_app(http_body, aws_body), access_log=None)
    await runner.setup()
    tcp = web.TCPSite(runner, "127.0.0.1", 0, backlog=4096)
    await tcp.start()
    sock = tmp / "trivial.sock"
    await web.UnixSite(runner, str(sock), backlog=4096).start()
    port = tcp._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    try:
        yield {"http": f"127.0.0.1:{port}", "uds": f"unix:{sock}"}
    finally:
        await runner.cleanup()


async def _body(target: str, path: str) -> bytes:
    conn = await RawHttpConnection.open(target)
    try:
        status, body = await conn.request(build_request("GET", path, MARK))
    finally:
        conn.close()
    if status != 200:
        raise RuntimeError(f"the gateway answered {status} for {path}: {body[:200]!r}")
    return body


async def measure(drv: Driver, target: str, surface: Surface, concurrency: int,
                  n: int) -> float:
    """Microseconds of this thread's CPU per request over one closed loop of `n`."""
    start = time.thread_time()
    await drv.run(target, concurrency, n, surface.path)
    return (time.thread_time() - start) / n * 1e6


async def run(requests: int, rounds: int, concurrencies: list[int],
              surfaces: list[Surface]) -> dict[str, Any]:
    out: dict[str, Any] = {"requests": requests, "rounds": rounds,
                           "loadavg": os.getloadavg()}
    with tempfile.TemporaryDirectory(prefix="lakegate-cpu-") as tmp_dir:
        tmp = Path(tmp_dir)
        async with gateway(tmp) as gw:
            http_body = await _body(gw["http"], NATIVE_PATH)
            aws_body = await _body(gw["http"], AWS_PATH)
            async with trivial(tmp, http_body, aws_body) as base, driver() as drv:
                for s in surfaces:
                    for conc in concurrencies:
                        key = "uds" if s.uds else "http"
                        # warm-up of both sides (connections, caches, specialization)
                        await measure(drv, gw[key], s, conc, requests // 4)
                        await measure(drv, base[key], s, conc, requests // 4)
                        g, b = [], []
                        for _ in range(rounds):
                            g.append(await measure(drv, gw[key], s, conc, requests))
                            b.append(await measure(drv, base[key], s, conc, requests))
                        out[f"{s.name}@{conc}"] = {
                            "gateway_us": round(min(g), 2), "trivial_us": round(min(b), 2),
                            "ratio": round(min(b) / min(g), 3),
                            "gateway_all": [round(x, 1) for x in g],
                            "trivial_all": [round(x, 1) for x in b],
                        }
                        print(f"{s.name:>4} c={conc:<3} gateway {min(g):6.2f} us  trivial "
                              f"{min(b):6.2f} us  ratio {min(b) / min(g):.3f}", flush=True)
    return out


async def profile(requests: int, concurrency: int, surface: Surface, top: int,
                  sampler: str) -> None:
    """One gateway run under a profiler: cProfile (thread CPU time, every call) or py-spy
    (sampling this process from outside, no per-call overhead; loadtest/profiler.py)."""
    from loadtest.profiler import Sampler, py_spy, top_frames

    with tempfile.TemporaryDirectory(prefix="lakegate-cpu-") as tmp_dir:
        async with gateway(Path(tmp_dir)) as gw, driver() as drv:
            key = "uds" if surface.uds else "http"
            await measure(drv, gw[key], surface, concurrency, requests // 4)
            if sampler == "py-spy":
                exe = py_spy()
                if exe is None:
                    raise SystemExit("py-spy is not installed")
                raw = Path(tmp_dir) / "spy.txt"
                started = time.monotonic()
                await measure(drv, gw[key], surface, concurrency, requests // 10)
                per_run = max(time.monotonic() - started, 0.01) * 10
                window = max(per_run * 2, _SAMPLE_S)  # py-spy samples at 200 Hz
                spy = Sampler(exe, os.getpid(), raw, window)
                await asyncio.sleep(0.5)  # py-spy attaches
                deadline = time.monotonic() + window
                while time.monotonic() < deadline:
                    await measure(drv, gw[key], surface, concurrency, requests)
                error = await asyncio.to_thread(spy.wait, window + 30)
                if error is not None:
                    raise SystemExit(error)
                frames = top_frames(raw.read_text(), top)
                print(f"{frames['samples']} samples")
                for label in ("self_pct", "inclusive_pct"):
                    print(label)
                    for name, pct in frames[label]:
                        print(f"  {pct:5.1f}  {name}")
                return
            prof = cProfile.Profile(time.thread_time)  # CPU, not wall: a write that wakes
            # the client on this core would otherwise be charged with the client's run
            prof.enable()
            await measure(drv, gw[key], surface, concurrency, requests)
            prof.disable()
    stats = pstats.Stats(prof)
    stats.sort_stats("tottime").print_stats(top)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--client", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--requests", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--concurrency", default="1,16")
    parser.add_argument("--surfaces", default="http,uds,aws")
    parser.add_argument("--profile", choices=[s.name for s in SURFACES])
    parser.add_argument("--profiler", choices=["cprofile", "py-spy"], default="py-spy")
    parser.add_argument("--top", type=int, default=30)
    parser.add_argument("--out", type=Path, help="also write the results as JSON here")
    args = parser.parse_args()
    import uvloop

    if args.client:
        uvloop.run(_client())
        return
    concs = [int(c) for c in args.concurrency.split(",")]
    if args.profile:
        surface = next(s for s in SURFACES if s.name == args.profile)
        uvloop.run(profile(args.requests, max(concs), surface, args.top, args.profiler))
        return
    chosen = [s for s in SURFACES if s.name in args.surfaces.split(",")]
    result = uvloop.run(run(args.requests, args.rounds, concs, chosen))
    if args.out is not None:
        args.out.write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
