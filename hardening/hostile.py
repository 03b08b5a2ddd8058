"""Hostile input against a running gateway: schemathesis on the OpenAPI document, malformed and
oversized gRPC messages, slowloris and connection floods on the UDS and TCP listeners, and the
per-caller rate limit (one noisy caller gets 429 while a quiet one is still served).

Every suite counts the cases it tried and the answers that were a server error (HTTP 5xx,
gRPC INTERNAL/UNKNOWN/DATA_LOSS) and checks the gateway process is still alive afterwards.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
import socket
import time
from dataclasses import dataclass, field
from typing import Any

from hardening.report import FuzzResult

GRPC_SERVER_ERRORS = {"INTERNAL", "UNKNOWN", "DATA_LOSS"}
# Upstream-availability answers are not defects of input handling (the catalog is real here).
UPSTREAM_STATUSES = {502, 503, 504}


@dataclass
class SuiteTally:
    """Counts for one fuzzer."""

    cases: int = 0
    server_errors: int = 0
    upstream_errors: int = 0
    statuses: dict[str, int] = field(default_factory=dict)
    examples: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)

    def saw(
        self, status: str, *, server_error: bool, upstream: bool = False, example: str = ""
    ) -> None:
        self.cases += 1
        self.statuses[status] = self.statuses.get(status, 0) + 1
        if upstream:
            self.upstream_errors += 1
        elif server_error:
            self.server_errors += 1
            if len(self.examples) < 10 and example:
                self.examples.append(example)

    def into(self, fuzz: FuzzResult, suite: str) -> None:
        fuzz.add(
            suite,
            self.cases,
            self.server_errors,
            upstream_5xx=self.upstream_errors,
            statuses=self.statuses,
        )
        fuzz.failures.extend(f"{suite}: {e}" for e in [*self.examples, *self.problems])


# ---- schemathesis ------------------------------------------------------------------------------


def run_schemathesis(
    base_url: str, *, token: str | None, max_examples: int, seed: int = 1234
) -> SuiteTally:
    """Positive and negative cases for every operation of `/v1/openapi.json`."""
    import schemathesis
    from hypothesis import HealthCheck, Phase, given, settings
    from hypothesis import seed as hseed
    from hypothesis.errors import Unsatisfiable
    from schemathesis import GenerationMode

    tally = SuiteTally()
    schema = schemathesis.openapi.from_url(base_url + "/v1/openapi.json")
    headers = {"X-Lakegate-Request": "1"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    for result in schema.get_all_operations():
        try:
            operation = result.ok()
        except Exception as exc:  # noqa: BLE001 - a schema error is itself a finding
            tally.examples.append(f"unloadable operation: {type(exc).__name__}")
            continue
        for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):
            try:
                strategy = operation.as_strategy(generation_mode=mode)
            except Exception as exc:  # noqa: BLE001 - reported as a finding
                tally.examples.append(
                    f"{operation.label} {mode.value}: no strategy ({type(exc).__name__})"
                )
                continue
            test = settings(
                max_examples=max_examples,
                deadline=None,
                database=None,
                phases=[Phase.explicit, Phase.generate],
                suppress_health_check=list(HealthCheck),
            )(given(case=strategy)(_make_exercise(tally, base_url, headers)))
            try:
                hseed(seed)(test)()
            except Unsatisfiable:
                # e.g. no way to make a parameterless operation's input invalid: nothing to try.
                tally.statuses[f"unsatisfiable:{operation.label}:{mode.value}"] = 1
    return tally


def _make_exercise(tally: SuiteTally, base_url: str, headers: dict[str, str]) -> Any:
    def exercise(case: Any) -> None:
        try:
            response = case.call(base_url=base_url, headers=dict(headers), timeout=15)
        except Exception as exc:  # noqa: BLE001 - refused/reset: the gateway fell over
            tally.saw(
                f"conn:{type(exc).__name__}",
                server_error=True,
                example=f"{case.method} {case.formatted_path}: {exc!s:.120}",
            )
            return
        status = response.status_code
        tally.saw(
            str(status),
            server_error=status >= 500,
            upstream=status in UPSTREAM_STATUSES,
            example=f"{case.method} {case.formatted_path} -> {status}",
        )

    return exercise


# ---- gRPC malformed / oversized messages ---------------------------------------------------


def _grpc_payloads(rng: random.Random, n: int) -> list[tuple[str, bytes]]:
    """Raw request bytes: random garbage, truncated valid messages, huge fields, deep nesting."""
    from lakegate.v1 import common_pb2, credentials_pb2

    valid = credentials_pb2.GetTableCredentialsRequest(
        table=common_pb2.TableRef(warehouse="demo", namespace=["demo_ns"], name="hx_t0"),
        access=common_pb2.ACCESS_MODE_READ,
    ).SerializeToString()
    out: list[tuple[str, bytes]] = [
        ("empty", b""),
        ("valid", valid),
        (
            "huge_name_1MiB",
            credentials_pb2.GetTableCredentialsRequest(
                table=common_pb2.TableRef(
                    warehouse="demo", namespace=["demo_ns"], name="x" * (1 << 20)
                )
            ).SerializeToString(),
        ),
        (
            "deep_namespace",
            credentials_pb2.GetTableCredentialsRequest(
                table=common_pb2.TableRef(warehouse="demo", namespace=["a"] * 5000, name="t")
            ).SerializeToString(),
        ),
        (
            "control_chars",
            credentials_pb2.GetTableCredentialsRequest(
                table=common_pb2.TableRef(warehouse="de\x00mo", namespace=["\x1f\x1f"], name="t\n")
            ).SerializeToString(),
        ),
        (
            "unknown_enum",
            credentials_pb2.GetTableCredentialsRequest(
                table=common_pb2.TableRef(warehouse="demo", namespace=["demo_ns"], name="t"),
                access=99,
            ).SerializeToString(),
        ),
        (
            "oversized_5MiB",
            b"\x0a" + b"\xff\xff\xff\x02" + os.urandom(64),
        ),  # length prefix claims ~5 MiB
        ("over_limit_8MiB", valid + b"\x7a" + b"\x80\x80\x80\x04" + b"\x00" * (8 << 20)),
        ("invalid_utf8", b"\x0a\x06\x0a\x04\xff\xfe\xfd\xfc"),
        ("wrong_wire_type", b"\x0d\x01\x02\x03\x04"),
    ]
    for i in range(n):
        kind = i % 3
        if kind == 0:
            out.append((f"random_{i}", rng.randbytes(rng.randint(1, 512))))
        elif kind == 1:
            cut = rng.randint(1, max(1, len(valid) - 1))
            out.append((f"truncated_{i}", valid[:cut]))
        else:
            b = bytearray(valid)
            for _ in range(rng.randint(1, 6)):
                b[rng.randrange(len(b))] = rng.randrange(256)
            out.append((f"bitflip_{i}", bytes(b)))
    return out


def run_grpc_fuzz(target: str, *, token: str | None, cases: int, seed: int = 99) -> SuiteTally:
    """Send raw (unparsed) bytes to every RPC method; nothing may come back INTERNAL/UNKNOWN."""
    import grpc

    tally = SuiteTally()
    rng = random.Random(seed)  # noqa: S311 - fuzz input, not crypto
    methods = [
        "/lakegate.v1.CredentialService/GetTableCredentials",
        "/lakegate.v1.CredentialService/InvalidateCredentials",
        "/lakegate.v1.CatalogService/LoadTable",
        "/lakegate.v1.CatalogService/ListTables",
        "/lakegate.v1.CatalogService/ResolveWarehouse",
    ]
    metadata = (("authorization", f"Bearer {token}"),) if token else ()
    payloads = _grpc_payloads(rng, cases)
    options = [
        ("grpc.max_send_message_length", 64 << 20),
        ("grpc.max_receive_message_length", 64 << 20),
    ]
    with grpc.insecure_channel(target, options=options) as channel:
        callers = {
            m: channel.unary_unary(m, request_serializer=None, response_deserializer=None)
            for m in methods
        }
        for i, (name, payload) in enumerate(payloads):
            # Mutating RPCs (Invalidate all=true) are fine to fuzz: they only drop cache entries.
            method = (
                methods[i % len(methods)]
                if name.startswith(("random", "truncated", "bitflip"))
                else methods[0]
            )
            try:
                callers[method](payload, metadata=metadata, timeout=10)
                tally.saw("OK", server_error=False)
            except grpc.RpcError as exc:
                code = exc.code().name if exc.code() else "NONE"
                tally.saw(
                    code,
                    server_error=code in GRPC_SERVER_ERRORS,
                    upstream=code == "UNAVAILABLE" and not _gateway_gone(target),
                    example=f"{method.rsplit('/', 1)[-1]} {name} -> {code}",
                )
    return tally


def _gateway_gone(target: str) -> bool:
    host, _, port = target.rpartition(":")
    with contextlib.suppress(OSError), socket.create_connection((host, int(port)), timeout=1):
        return False
    return True


# ---- slowloris and connection floods -------------------------------------------------------


async def _open(
    address: str | tuple[str, int],
) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    if isinstance(address, str):
        return await asyncio.open_unix_connection(address)
    return await asyncio.open_connection(*address)


async def _slowloris(address: str | tuple[str, int], conns: int, hold_s: float) -> int:
    """Open `conns` connections that each dribble a never-finished request; returns how many the
    server closed on its own before `hold_s` (an idle/header timeout)."""
    writers: list[asyncio.StreamWriter] = []
    readers: list[asyncio.StreamReader] = []
    for _ in range(conns):
        try:
            r, w = await _open(address)
        except OSError:
            continue
        w.write(b"GET /v1/openapi.json HTTP/1.1\r\nHost: x\r\n")
        readers.append(r)
        writers.append(w)
    closed = 0
    deadline = time.monotonic() + hold_s
    while time.monotonic() < deadline:
        for w in writers:
            if not w.is_closing():
                with contextlib.suppress(OSError, RuntimeError):
                    w.write(b"X-a: b\r\n")
        await asyncio.sleep(1.0)
    for r in readers:
        if r.at_eof():
            closed += 1
    for w in writers:
        w.close()
    return closed


async def _served_while(address: str | tuple[str, int], attempts: int) -> tuple[int, int]:
    """While the listener is under attack, can a legitimate caller still get `/livez`?"""
    ok = 0
    for _ in range(attempts):
        try:
            async with asyncio.timeout(5):
                r, w = await _open(address)
                w.write(b"GET /livez HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
                await w.drain()
                data = await r.read(200)
                w.close()
            if data.startswith(b"HTTP/1.1 200"):
                ok += 1
        except (OSError, TimeoutError):
            pass
        await asyncio.sleep(0.2)
    return ok, attempts


async def _flood(address: str | tuple[str, int], conns: int) -> tuple[int, int]:
    """Open and abandon `conns` connections as fast as possible (half-open request, then RST)."""
    opened = 0
    failed = 0
    sem = asyncio.Semaphore(200)

    async def one() -> None:
        nonlocal opened, failed
        async with sem:
            try:
                async with asyncio.timeout(5):
                    _, w = await _open(address)
                opened += 1
                w.write(b"POST /v1/cache/invalidate HTTP/1.1\r\nContent-Length: 100000\r\n\r\n{")
                w.transport.abort()
            except (OSError, TimeoutError):
                failed += 1

    await asyncio.gather(*(one() for _ in range(conns)))
    return opened, failed


def run_socket_attacks(
    http_url: str, uds: str, *, slow_conns: int, hold_s: float, flood_conns: int
) -> SuiteTally:
    """Slowloris and floods on TCP and UDS (bounded), checking the listener keeps serving."""
    host_port = http_url.removeprefix("http://").split(":")
    tcp = (host_port[0], int(host_port[1]))
    tally = SuiteTally()

    async def attack(address: str | tuple[str, int], label: str) -> None:
        slow = asyncio.create_task(_slowloris(address, slow_conns, hold_s))
        await asyncio.sleep(0.5)
        ok, _ = await _served_while(address, attempts=5)
        closed = await slow
        tally.statuses[f"{label}_slowloris_livez_ok"] = ok
        tally.statuses[f"{label}_slowloris_closed_by_server"] = closed
        if ok == 0:
            tally.problems.append(
                f"{label}: /livez starved while {slow_conns} slowloris connections were open"
            )
        opened, failed = await _flood(address, flood_conns)
        ok2, _ = await _served_while(address, attempts=5)
        tally.statuses[f"{label}_flood_livez_ok"] = ok2
        tally.statuses[f"{label}_flood_opened"] = opened
        tally.statuses[f"{label}_flood_refused"] = failed
        if ok2 == 0:
            tally.problems.append(
                f"{label}: /livez not served after a {flood_conns}-connection flood"
            )
        tally.cases += slow_conns + flood_conns  # every attacking connection is a case

    async def both() -> None:
        await attack(tcp, "tcp")
        if uds:
            await attack(uds, "uds")

    asyncio.run(both())
    return tally


# ---- per-caller rate limit ---------------------------------------------------------------------


def run_rate_limit(
    http_url: str,
    path: str,
    *,
    noisy_token: str,
    quiet_token: str,
    burst: int,
    seconds: float = 3.0,
) -> tuple[SuiteTally, dict[str, Any]]:
    """A noisy caller hammers; it must get 429s, and the quiet caller must keep getting 200s."""
    import aiohttp

    tally = SuiteTally()
    stats: dict[str, Any] = {
        "noisy_200": 0,
        "noisy_429": 0,
        "noisy_other": 0,
        "quiet_200": 0,
        "quiet_other": 0,
    }

    async def go() -> None:
        deadline = time.monotonic() + seconds
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=10)) as session:

            async def caller(who: str, token: str, pause_s: float) -> None:
                """One client loop; the noisy ones never pause, the quiet one every 0.1 s."""
                while time.monotonic() < deadline:
                    async with session.get(
                        http_url + path, headers={"Authorization": f"Bearer {token}"}
                    ) as r:
                        await r.read()
                    limited = r.status == 429 and who == "noisy"
                    kind = "200" if r.status == 200 else "429" if limited else "other"
                    stats[f"{who}_{kind}"] += 1
                    tally.saw(
                        str(r.status),
                        server_error=r.status >= 500,
                        upstream=r.status in UPSTREAM_STATUSES,
                    )
                    if limited and not r.headers.get("Retry-After"):
                        stats["missing_retry_after"] = stats.get("missing_retry_after", 0) + 1
                    if pause_s:
                        await asyncio.sleep(pause_s)

            await asyncio.gather(
                *(caller("noisy", noisy_token, 0.0) for _ in range(8)),
                caller("quiet", quiet_token, 0.1),
            )

    asyncio.run(go())
    if stats["noisy_429"] == 0:
        tally.problems.append(f"noisy caller never got 429 (burst {burst})")
    if stats["quiet_200"] == 0 or stats["quiet_other"] > 0:
        tally.problems.append(f"quiet caller was refused or starved ({stats})")
    return tally, stats
