import asyncio
import socket

import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from gateway.errors import UnavailableError, UpstreamTimeoutError
from gateway.upstream.transport import AiohttpTransport, RawRequest

BIG = b'{"metadata": "' + b"x" * 300_000 + b'"}'


@pytest.fixture
async def server():
    release = asyncio.Event()

    async def ok(request: web.Request) -> web.Response:
        return web.json_response({"seen": request.headers.get("x-request-id")},
                                 headers={"X-Thing": "1"})

    async def slow(request: web.Request) -> web.Response:
        await release.wait()
        return web.Response(text="late")

    async def redirect(request: web.Request) -> web.Response:
        raise web.HTTPFound("/ok")

    async def big(request: web.Request) -> web.StreamResponse:
        """A body longer than one network read, sent in pieces (as a large catalog answer
        arrives); ``?declared=1`` announces its length, else it is chunked."""
        answer = web.StreamResponse()
        if request.query.get("declared"):
            answer.content_length = len(BIG)
        await answer.prepare(request)
        for start in range(0, len(BIG), 10_000):
            await answer.write(BIG[start:start + 10_000])
            await asyncio.sleep(0.001)
        await answer.write_eof()
        return answer

    app = web.Application()
    app.router.add_get("/big", big)
    app.router.add_get("/ok", ok)
    app.router.add_get("/slow", slow)
    app.router.add_get("/redirect", redirect)
    srv = TestServer(app, host="127.0.0.1")
    await srv.start_server()
    yield srv
    release.set()
    await srv.close()


async def test_request_returns_status_lowercased_headers_and_body(server):
    t = AiohttpTransport()
    try:
        resp = await t.send(RawRequest("GET", str(server.make_url("/ok")), 5,
                                       headers={"x-request-id": "abc"}))
    finally:
        await t.close()
    assert resp.status == 200
    assert resp.headers["x-thing"] == "1"
    assert b'"abc"' in resp.body


async def test_redirects_are_not_followed(server):
    t = AiohttpTransport()
    try:
        resp = await t.send(RawRequest("GET", str(server.make_url("/redirect")), 5))
    finally:
        await t.close()
    assert resp.status == 302


async def test_timeout_becomes_upstream_timeout_error(server):
    t = AiohttpTransport()
    try:
        with pytest.raises(UpstreamTimeoutError):
            await t.send(RawRequest("GET", str(server.make_url("/slow")), 0.05))
    finally:
        await t.close()


async def test_refused_connection_becomes_unavailable_without_leaking_the_query():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    t = AiohttpTransport()
    try:
        with pytest.raises(UnavailableError) as info:
            await t.send(RawRequest("GET", f"http://127.0.0.1:{port}/x?secret=hunter2", 2))
    finally:
        await t.close()
    assert "hunter2" not in str(info.value)
    assert f"127.0.0.1:{port}" in str(info.value)


async def test_closed_transport_refuses_requests():
    t = AiohttpTransport()
    await t.close()
    with pytest.raises(UnavailableError):
        await t.send(RawRequest("GET", "http://127.0.0.1:1/", 1))


@pytest.mark.parametrize("declared", [False, True], ids=["chunked", "content-length"])
async def test_a_body_longer_than_one_read_arrives_whole(server, declared):
    """Regression: the transport returned what the first read had buffered (about 64 KiB),
    and pyiceberg failed to parse an Iceberg table's metadata as the table grew."""
    t = AiohttpTransport()
    try:
        query = "?declared=1" if declared else ""
        resp = await t.send(RawRequest("GET", str(server.make_url("/big")) + query, 5))
    finally:
        await t.close()
    assert resp.body == BIG


@pytest.mark.parametrize("declared", [False, True], ids=["chunked", "content-length"])
async def test_a_body_over_the_cap_is_refused(server, monkeypatch, declared):
    from gateway.upstream import transport

    monkeypatch.setattr(transport, "UPSTREAM_MAX_RESPONSE_BYTES", 100_000)
    t = AiohttpTransport()
    try:
        query = "?declared=1" if declared else ""
        with pytest.raises(UnavailableError, match="too large"):
            await t.send(RawRequest("GET", str(server.make_url("/big")) + query, 5))
    finally:
        await t.close()
