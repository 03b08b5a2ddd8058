"""gateway/surfaces/http_app.py: the daemon's hosting (aiohttp's low-level server) behaves like
the URL-dispatcher hosting the other surface tests use, where they differ in code.

The low-level server has no URL dispatcher, so `Expect` handling is the pipeline's own
(`HttpPipeline.serve`): checked here over a real loopback socket, byte for byte.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator

import pytest
from aiohttp import web

from gateway.metrics import Metrics
from gateway.surfaces.accounting import Recorder
from gateway.surfaces.http_app import HttpDeps, build_http_server
from tests.fakes.clock import FakeClock
from tests.unit.surfaces.conftest import build_gate
from tests.unit.surfaces.fake_operations import FakeOperations

BODY = json.dumps({"all": True}).encode()
HEAD = (b"POST /v1/cache/invalidate HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Lakegate-Request: 1\r\n"
        b"Content-Type: application/json\r\nContent-Length: " + str(len(BODY)).encode() + b"\r\n")


@pytest.fixture
async def port(fake_ops: FakeOperations, metrics: Metrics,
               clock: FakeClock) -> AsyncIterator[int]:
    deps = HttpDeps(fake_ops, build_gate(fake_ops, metrics, clock), Recorder(metrics, clock),
                    metrics, clock, 1 << 20)
    runner = web.ServerRunner(build_http_server(deps), handle_signals=False)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    try:
        yield runner.addresses[0][1]
    finally:
        await runner.cleanup()


async def _status_line(reader: asyncio.StreamReader) -> bytes:
    head = await reader.readuntil(b"\r\n\r\n")
    return head.split(b"\r\n", 1)[0]


async def test_expect_100_continue_is_answered_before_the_body(
        port: int, fake_ops: FakeOperations) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        async with asyncio.timeout(5):
            writer.write(HEAD + b"Expect: 100-continue\r\n\r\n")
            # The client holds its body until the server says continue.
            assert await _status_line(reader) == b"HTTP/1.1 100 Continue"
            writer.write(BODY)
            assert await _status_line(reader) == b"HTTP/1.1 200 OK"
    finally:
        writer.close()
    assert fake_ops.calls["invalidate"] == 1


async def test_an_unknown_expectation_is_417(port: int, fake_ops: FakeOperations) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        async with asyncio.timeout(5):
            writer.write(HEAD + b"Expect: something-else\r\n\r\n" + BODY)
            assert await _status_line(reader) == b"HTTP/1.1 417 Expectation Failed"
    finally:
        writer.close()
    assert fake_ops.calls["invalidate"] == 0
