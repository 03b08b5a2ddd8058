"""Send the structural corpus (structural.py, structural_grpc.py) to a gateway, per category.

HTTP cases go over raw TCP sockets exactly as generated (nothing re-encoded by a client
library); gRPC cases are generic unary calls with no request serializer. A server error is an
HTTP 5xx, gRPC INTERNAL/UNKNOWN/DATA_LOSS, or the gateway no longer accepting connections.
Every other outcome (4xx, 2xx, a connection the HTTP parser closed, RESOURCE_EXHAUSTED, ...) is
counted by name. A genuine upstream 502/503/504 is counted apart (hostile.SuiteTally), though
no structural case should reach one. Afterwards the gateway must answer /readyz and its log
must hold no Traceback.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import TypeVar

from devstack.processes import poll_until
from devstack.readiness import http_ok
from hardening.hostile import GRPC_SERVER_ERRORS, UPSTREAM_STATUSES, SuiteTally, _gateway_gone
from hardening.report import FuzzResult
from hardening.structural import HTTP_CATEGORIES, HttpCase, Target, http_corpus
from hardening.structural_grpc import GRPC_CATEGORIES, GrpcCase, grpc_corpus

CATEGORIES = (*HTTP_CATEGORIES, *GRPC_CATEGORIES)
C = TypeVar("C", HttpCase, GrpcCase)


class CategoryTally(SuiteTally):
    """A SuiteTally that also counts the cases per surface (to show every surface was hit)."""

    def __init__(self) -> None:
        super().__init__()
        self.surfaces: dict[str, int] = {}

    def on(self, surface: str) -> None:
        self.surfaces[surface] = self.surfaces.get(surface, 0) + 1

    def extra(self) -> dict[str, object]:
        return {"other_outcomes": self.cases - self.server_errors - self.upstream_errors,
                "surfaces": dict(sorted(self.surfaces.items()))}


def sample(cases: Iterable[C], per_category: int | None) -> Iterator[C]:
    """Every case, or about `per_category` cases spread evenly over each category."""
    if per_category is None:
        yield from cases
        return
    by_cat: dict[str, list[C]] = {}
    for case in cases:
        by_cat.setdefault(case.category, []).append(case)
    for group in by_cat.values():
        stride = max(1, len(group) // per_category)
        yield from group[::stride][:per_category]


async def send_http(host: str, port: int, case: HttpCase, timeout_s: float = 15.0) -> str:
    """Write the raw request; return the status code or how the exchange ended."""
    try:
        reader, writer = await asyncio.wait_for(asyncio.open_connection(host, port), timeout_s)
    except (OSError, TimeoutError):
        return "connect_failed"
    try:
        try:
            writer.write(case.raw())
            await asyncio.wait_for(writer.drain(), timeout_s)
        except (OSError, RuntimeError, TimeoutError):
            pass  # the server may answer (400/413/431) and close before reading everything
        try:
            if case.content_length:
                line = await asyncio.wait_for(reader.readline(), timeout_s)
            else:  # declares more body than it has: wait a little, then end it (no hang)
                line = await _line_or_eof(reader, writer, timeout_s)
        except TimeoutError:
            return "timeout"
        except OSError:
            return "reset"
        parts = line.split()
        if len(parts) >= 2 and parts[0].startswith(b"HTTP/") and parts[1].isdigit():
            return parts[1].decode()
        return "closed" if not line else "unparseable"
    finally:
        writer.transport.abort()


async def _line_or_eof(reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                      timeout_s: float) -> bytes:
    """The status line if the server answers within 2 s, else after a half-close."""
    try:
        return await asyncio.wait_for(asyncio.shield(line := asyncio.ensure_future(
            reader.readline())), 2.0)
    except TimeoutError:
        with contextlib.suppress(OSError, RuntimeError):
            writer.write_eof()
        return await asyncio.wait_for(line, timeout_s)


def classify_http(tally: CategoryTally, case: HttpCase, outcome: str, gone: bool) -> None:
    """Count one HTTP outcome; a dropped connection is a server error only if the gateway went."""
    tally.on(case.surface)
    example = f"[{case.surface}] {case.label[:160]} -> {outcome}"
    if outcome.isdigit():
        status = int(outcome)
        tally.saw(outcome, server_error=status >= 500, upstream=status in UPSTREAM_STATUSES,
                  example=example)
    else:
        tally.saw(outcome, server_error=gone or outcome == "connect_failed", example=example)


async def run_http_cases(http_url: str, cases: Iterable[HttpCase],
                         tallies: dict[str, CategoryTally], concurrency: int = 6) -> None:
    """Send the cases with `concurrency` workers sharing one lazy iterator (big bodies are
    built only when sent)."""
    host, _, port = http_url.removeprefix("http://").rpartition(":")
    source = iter(cases)

    async def worker() -> None:
        for case in source:
            outcome = await send_http(host, int(port), case)
            gone = outcome in ("reset", "closed", "timeout") and _gateway_gone(f"{host}:{port}")
            classify_http(tallies[case.category], case, outcome, gone)

    await asyncio.gather(*(worker() for _ in range(concurrency)))


def run_grpc_cases(target: str, cases: Iterable[GrpcCase],
                   tallies: dict[str, CategoryTally]) -> None:
    """Each raw payload with its metadata to its method; status codes counted per category."""
    import grpc

    options = [("grpc.max_send_message_length", 64 << 20),
               ("grpc.max_receive_message_length", 64 << 20),
               ("grpc.max_metadata_size", 4 << 20)]
    with grpc.insecure_channel(target, options=options) as channel:
        callers: dict[str, grpc.UnaryUnaryMultiCallable] = {}
        for case in cases:
            call = callers.get(case.method)
            if call is None:
                call = callers[case.method] = channel.unary_unary(
                    case.method, request_serializer=None, response_deserializer=None)
            tally = tallies[case.category]
            tally.on(case.surface)
            example = f"{case.method.rsplit('/', 1)[-1]} {case.label} -> "
            try:
                call(case.payload, metadata=case.metadata, timeout=15)
                tally.saw("OK", server_error=False)
            except grpc.RpcError as exc:
                code = exc.code().name if exc.code() else "NONE"
                gone = code == "UNAVAILABLE" and _gateway_gone(target)
                tally.saw(code, server_error=code in GRPC_SERVER_ERRORS or gone,
                          example=example + f"{code} {exc.details()!s:.100}")
            except ValueError as exc:  # the client library refused to send it (metadata)
                tally.saw("client_refused", server_error=False, example=f"{example}{exc!s:.80}")


def run_structural(http_url: str, grpc_target: str, names: Target, *,
                   per_category: int | None = None,
                   concurrency: int = 6) -> dict[str, CategoryTally]:
    """The whole corpus (or a sample of each category) against one gateway."""
    tallies = {c: CategoryTally() for c in CATEGORIES}
    asyncio.run(run_http_cases(http_url, sample(http_corpus(names), per_category), tallies,
                               concurrency))
    run_grpc_cases(grpc_target, sample(grpc_corpus(names), per_category), tallies)
    return tallies


def traceback_lines(log_dir: Path) -> list[str]:
    """Lines of the gateway's logs that carry a Traceback (an escaped exception)."""
    found: list[str] = []
    for path in sorted(log_dir.glob("*.log")):
        with path.open(errors="replace") as fh:
            found += [line[:300] for line in fh if "Traceback" in line]
    return found


def run_structural_suite(http_url: str, grpc_target: str, log_dir: Path, names: Target,
                         fuzz: FuzzResult, *, quick: bool = False) -> None:
    """Run the corpus, record one `structural_<category>` row per category, then require the
    gateway to be ready and its log free of tracebacks (either is a failure of the run)."""
    tallies = run_structural(http_url, grpc_target, names, per_category=40 if quick else None)
    for category, tally in tallies.items():
        suite = f"structural_{category}"
        tally.into(fuzz, suite)
        fuzz.by_suite[suite].update(tally.extra())
        if tally.cases == 0:
            fuzz.failures.append(f"{suite}: no case was sent")
    ready = poll_until(lambda: http_ok(http_url + "/readyz"), timeout_s=30)
    tracebacks = traceback_lines(log_dir)
    fuzz.by_suite["structural_after"] = {"cases": 0, "server_errors": 0,
                                         "readyz_ok": ready is not None,
                                         "traceback_lines": len(tracebacks)}
    if ready is None:
        fuzz.crashes += 1
        fuzz.failures.append("structural: /readyz not OK within 30 s after the corpus")
    fuzz.failures.extend(f"structural: traceback in gateway log: {t}" for t in tracebacks[:5])
