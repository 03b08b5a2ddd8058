"""A fast sample of every structural-attack category against the daemon's own HTTP server and
gRPC surface (in-process, over real TCP sockets, a fake service behind them).

`make harden` sends the whole corpus to a real gateway process on the stack; this sample runs in
seconds so a regression (a 5xx, an INTERNAL, a traceback) fails `make test` first.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from gateway.metrics import Metrics
from gateway.server_log import SERVER_LOGGER, MalformedRequestFilter
from gateway.surfaces.accounting import Recorder
from gateway.surfaces.grpc_server import GrpcSurface
from gateway.surfaces.http_app import HttpDeps, build_http_server
from hardening.structural import HTTP_CATEGORIES, HttpCase, Target, gateway_routes, http_corpus
from hardening.structural_grpc import GRPC_CATEGORIES, grpc_corpus, grpc_methods
from hardening.structural_suite import (
    CategoryTally,
    run_grpc_cases,
    run_http_cases,
    sample,
    send_http,
)
from tests.fakes.clock import FakeClock
from tests.unit.surfaces.conftest import build_gate
from tests.unit.surfaces.fake_operations import FakeOperations

NAMES = Target("demo", "demo_ns", "orders")
PER_CATEGORY = 30


@dataclass
class InProcessGateway:
    http_url: str
    grpc_target: str


@pytest.fixture(scope="module")
def gateway() -> Iterator[InProcessGateway]:
    """The daemon's HTTP server and gRPC surface on their own event loop in a thread (the
    corpus senders are blocking, like the harness)."""
    loop = asyncio.new_event_loop()
    ready = threading.Event()
    stop = asyncio.Event()
    box: dict[str, str] = {}

    async def serve() -> None:
        ops = FakeOperations()
        ops.add_table(("demo_ns",), "orders")
        metrics, clock = Metrics(), FakeClock()
        gate = build_gate(ops, metrics, clock)
        deps = HttpDeps(ops, gate, Recorder(metrics, clock), metrics, clock, 1 << 20)
        http = await loop.create_server(build_http_server(deps), "127.0.0.1", 0)
        grpc_surface = GrpcSurface(ops, gate, Recorder(metrics, clock),
                                   max_message_bytes=1 << 20)
        grpc_port = grpc_surface.bind_tcp("127.0.0.1", 0)
        await grpc_surface.server.start()
        box["http"] = f"http://127.0.0.1:{http.sockets[0].getsockname()[1]}"
        box["grpc"] = f"127.0.0.1:{grpc_port}"
        ready.set()
        await stop.wait()
        await grpc_surface.server.stop(0)
        http.close()

    # As the daemon does (gateway/app.py): parse errors become one counted WARNING line.
    malformed = MalformedRequestFilter(lambda: None, loop.time)
    logging.getLogger(SERVER_LOGGER).addFilter(malformed)
    thread = threading.Thread(target=loop.run_until_complete, args=(serve(),), daemon=True)
    thread.start()
    assert ready.wait(20)
    yield InProcessGateway(box["http"], box["grpc"])
    loop.call_soon_threadsafe(stop.set)
    thread.join(20)
    logging.getLogger(SERVER_LOGGER).removeFilter(malformed)


@pytest.fixture
def no_tracebacks(caplog: pytest.LogCaptureFixture) -> Iterator[None]:
    """Fail the test when the server side logged an exception (the in-process Traceback)."""
    caplog.set_level(logging.ERROR)
    yield
    time.sleep(0.5)  # aiohttp logs a body it could not drain after the answer went out
    records = [*caplog.get_records("call"), *caplog.get_records("teardown")]
    escaped = [r.getMessage() for r in records if r.exc_info]
    assert not escaped, escaped[:3]


def _one_category(category: str) -> list[HttpCase]:
    return [c for c in sample(http_corpus(NAMES), PER_CATEGORY) if c.category == category]


@pytest.mark.parametrize("category", HTTP_CATEGORIES)
@pytest.mark.usefixtures("no_tracebacks")
def test_http_category_sample_gets_no_5xx(gateway: InProcessGateway, category: str) -> None:
    cases = _one_category(category)
    tallies = {category: CategoryTally()}
    asyncio.run(run_http_cases(gateway.http_url, cases, tallies, concurrency=4))
    tally = tallies[category]
    assert tally.cases == len(cases) >= PER_CATEGORY - 1
    assert tally.server_errors == 0, tally.examples
    assert tally.upstream_errors == 0, tally.examples
    # The sample reached the parsers: some attacks were refused with a 4xx (an overlong doc
    # string or a null optional field may rightly be served).
    assert any(s.startswith("4") for s in tally.statuses), tally.statuses


@pytest.mark.parametrize("category", GRPC_CATEGORIES)
@pytest.mark.usefixtures("no_tracebacks")
def test_grpc_category_sample_gets_no_internal(gateway: InProcessGateway, category: str) -> None:
    cases = [c for c in sample(grpc_corpus(NAMES), PER_CATEGORY) if c.category == category]
    tallies = {category: CategoryTally()}
    run_grpc_cases(gateway.grpc_target, cases, tallies)
    tally = tallies[category]
    assert tally.cases == len(cases) >= PER_CATEGORY - 1
    assert tally.server_errors == 0, tally.examples
    assert set(tally.surfaces) == {"grpc"}


def test_deep_nesting_is_400_on_every_body_route(gateway: InProcessGateway) -> None:
    cases = [c for c in http_corpus(NAMES) if c.category == "json_nesting"
             and c.label.endswith(("100k_open_brackets", "50k_open_objects"))]
    tallies = {"json_nesting": CategoryTally()}
    asyncio.run(run_http_cases(gateway.http_url, cases, tallies, concurrency=4))
    assert len(cases) >= 2 * 9  # every POST route of every surface
    assert tallies["json_nesting"].statuses == {"400": len(cases)}


@pytest.mark.usefixtures("no_tracebacks")
def test_undecodable_body_is_400_and_logs_no_traceback(gateway: InProcessGateway) -> None:
    """Regressions: gzip Content-Encoding over non-gzip bytes escaped read_json as a 500, and
    on routes that never read the body aiohttp's drain logged an ERROR traceback."""
    cases = [c for c in http_corpus(NAMES) if c.label.endswith("content_encoding_gzip")]
    tallies = {"headers": CategoryTally()}
    asyncio.run(run_http_cases(gateway.http_url, cases, tallies, concurrency=4))
    body_routes = [c for c in cases if c.label.startswith(("POST", "PUT"))]
    assert len(body_routes) >= 9
    assert len(cases) == len(gateway_routes())
    assert tallies["headers"].server_errors == 0, tallies["headers"].examples
    assert tallies["headers"].statuses["400"] >= len(body_routes)


def test_corpus_covers_every_surface_route_and_method() -> None:
    routes = gateway_routes()
    surfaces = {r.surface for r in routes}
    assert {"native", "aws", "lakekeeper", "catalog", "ops"} <= surfaces
    labels = {c.label.split(" ")[1] for c in http_corpus(NAMES) if c.category == "bad_encoding"}
    assert {r.path for r in routes} <= labels
    methods = {c.method for c in grpc_corpus(NAMES)}
    assert methods == set(grpc_methods())
    assert len(methods) >= 8


def test_a_5xx_is_counted_as_a_server_error() -> None:
    """The classifier itself: a server that answers 500 to everything must be caught."""

    async def go() -> CategoryTally:
        async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            await reader.read(1 << 16)
            writer.write(b"HTTP/1.1 500 Internal Server Error\r\nContent-Length: 0\r\n\r\n")
            writer.close()

        server = await asyncio.start_server(handle, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        tallies = {"paging": CategoryTally()}
        cases = [c for c in http_corpus(NAMES) if c.category == "paging"][:3]
        await run_http_cases(f"http://127.0.0.1:{port}", cases, tallies, concurrency=1)
        assert await send_http("127.0.0.1", port, cases[0]) == "500"
        server.close()
        return tallies["paging"]

    tally = asyncio.run(go())
    assert (tally.cases, tally.server_errors) == (3, 3)
