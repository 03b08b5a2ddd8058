"""gateway/surfaces/bytes_response.py: the prebuilt answer writes what aiohttp would write.

Each case serves the same body twice over a real aiohttp low-level server on loopback, once as
a `BytesResponse` and once as the `web.Response` it replaces, and compares the raw messages
(status line, headers but Date, body) and whether the connection stays open.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
from aiohttp import web
from aiohttp.http import HttpVersion11

from gateway.surfaces.bytes_response import BytesResponse, HttpDate, header_value_ok

BODY = b'{"credentials":[{"prefix":"s3://b/t","config":{"s3.session-token":"x"}}]}'
EXTRA = (("Cache-Control", "private"), ("Vary", "authorization"))

Handler = Callable[[web.BaseRequest], Any]


def prebuilt(request: web.BaseRequest) -> Any:
    answer = BytesResponse(BODY, HttpDate())
    answer.request_id = "rid-1"
    answer.extra = EXTRA
    return answer


def regular(request: web.BaseRequest) -> Any:
    return web.Response(body=BODY, content_type="application/json",
                        headers={"x-request-id": "rid-1", **dict(EXTRA)})


def prebuilt_no_store(request: web.BaseRequest) -> Any:
    """A native or AWS credential answer: its own Cache-Control, no Lakekeeper headers."""
    answer = BytesResponse(BODY, HttpDate(), "no-store")
    answer.request_id = "rid-1"
    return answer


def regular_no_store(request: web.BaseRequest) -> Any:
    return web.Response(body=BODY, content_type="application/json",
                        headers={"x-request-id": "rid-1", "Cache-Control": "no-store"})


def prebuilt_no_id(request: web.BaseRequest) -> Any:
    """The one-formatting hot path without a request id, and a Cache-Control value that is
    formatted per answer (not one of the prebuilt lines)."""
    return BytesResponse(BODY, HttpDate(), "max-age=0, private")


def regular_no_id(request: web.BaseRequest) -> Any:
    return web.Response(body=BODY, content_type="application/json",
                        headers={"Cache-Control": "max-age=0, private"})


def prebuilt_plain(request: web.BaseRequest) -> Any:
    answer = BytesResponse(BODY, HttpDate())
    answer.request_id = "rid-1"
    return answer


def regular_plain(request: web.BaseRequest) -> Any:
    return web.Response(body=BODY, content_type="application/json",
                        headers={"x-request-id": "rid-1"})


SHAPES = {"lakekeeper": (prebuilt, regular), "no-store": (prebuilt_no_store, regular_no_store),
          "no-id": (prebuilt_no_id, regular_no_id), "plain": (prebuilt_plain, regular_plain)}


async def _serve(handler: Handler) -> AsyncIterator[int]:
    async def handle(request: web.BaseRequest) -> Any:
        return handler(request)

    server = web.Server(handle, access_log=None)
    loop = asyncio.get_running_loop()
    listener = await loop.create_server(server, "127.0.0.1", 0)
    try:
        yield listener.sockets[0].getsockname()[1]
    finally:
        listener.close()
        await server.shutdown(1.0)
        await listener.wait_closed()


async def _read_answer(reader: asyncio.StreamReader, head: bool) -> tuple[str, dict[str, str],
                                                                          bytes]:
    raw = await reader.readuntil(b"\r\n\r\n")
    lines = raw.decode().split("\r\n")
    headers = {}
    for line in lines[1:]:
        if line:
            name, _, value = line.partition(": ")
            headers[name.lower()] = value
    length = 0 if head else int(headers.get("content-length", "0"))
    body = await reader.readexactly(length)
    return lines[0], headers, body


async def _exchange(handler: Handler, request: bytes, *, requests: int = 1,
                    head: bool = False) -> tuple[list[tuple[str, dict[str, str], bytes]], bool]:
    """The answers to `request` sent `requests` times (pipelined), and whether the server then
    closed the connection."""
    gen = _serve(handler)
    port = await gen.__anext__()
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        try:
            writer.write(request * requests)
            async with asyncio.timeout(5):
                answers = [await _read_answer(reader, head) for _ in range(requests)]
                try:
                    closed = await asyncio.wait_for(reader.read(1), 0.3) == b""
                except TimeoutError:
                    closed = False
            return answers, closed
        finally:
            writer.close()
    finally:
        await gen.aclose()


CASES = {
    "1.1 keep-alive": (b"GET /c HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", False),
    "1.1 close": (b"GET /c HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n", False),
    "1.0": (b"GET /c HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n", False),
    "1.0 keep-alive": (b"GET /c HTTP/1.0\r\nHost: 127.0.0.1\r\nConnection: keep-alive\r\n\r\n",
                       False),
    "HEAD": (b"HEAD /c HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", True),
}


@pytest.mark.parametrize("shape", sorted(SHAPES))
@pytest.mark.parametrize("case", sorted(CASES))
async def test_writes_the_message_aiohttp_writes(case: str, shape: str) -> None:
    request, head = CASES[case]
    ours_handler, theirs_handler = SHAPES[shape]
    ours, our_closed = await _exchange(ours_handler, request, head=head)
    theirs, their_closed = await _exchange(theirs_handler, request, head=head)
    (status, headers, body), = ours
    (want_status, want_headers, want_body), = theirs
    assert status == want_status
    assert "date" in headers
    headers.pop("date")
    want_headers.pop("date")
    assert headers == want_headers
    assert body == want_body == (b"" if head else BODY)
    assert our_closed == their_closed
    assert our_closed == (case in ("1.1 close", "1.0"))


async def test_pipelined_requests_get_every_answer_in_order() -> None:
    answers, closed = await _exchange(prebuilt, CASES["1.1 keep-alive"][0], requests=3)
    assert [a[2] for a in answers] == [BODY] * 3
    assert not closed


class _Transport:
    def __init__(self, closing: bool = False, left_buffered: int = 0) -> None:
        self.closing = closing
        self.left_buffered = left_buffered  # what a write leaves in the transport's buffer
        self.written: list[bytes] = []

    def is_closing(self) -> bool:
        return self.closing

    def write(self, data: bytes) -> None:
        self.written.append(data)

    def get_write_buffer_size(self) -> int:
        return self.left_buffered if self.written else 0


class _Writer:
    def __init__(self, transport: _Transport | None) -> None:
        self.transport = transport
        self.drained = 0

    async def drain(self) -> None:
        self.drained += 1


class _Request:
    method = "GET"
    keep_alive = True
    version = HttpVersion11

    def __init__(self, writer: _Writer) -> None:
        self.writer = writer


@pytest.mark.parametrize(("left_buffered", "drains"), [(0, 0), (70_000, 1)])
async def test_one_write_then_the_writers_back_pressure(left_buffered: int, drains: int) -> None:
    """The writer's drain (which waits while the protocol is paused) is awaited when the write
    left bytes buffered; an answer the socket took whole has nothing to wait for."""
    transport = _Transport(left_buffered=left_buffered)
    writer = _Writer(transport)
    answer = BytesResponse(BODY, HttpDate())
    await answer.prepare(_Request(writer))  # type: ignore[arg-type]
    await answer.prepare(_Request(writer))  # type: ignore[arg-type]  (a second call: nothing)
    await answer.write_eof()
    assert len(transport.written) == 1
    assert transport.written[0].endswith(b"\r\n\r\n" + BODY)
    assert writer.drained == drains
    assert answer.keep_alive is True
    assert answer.body_length == len(BODY)


@pytest.mark.parametrize("transport", [None, _Transport(closing=True)])
async def test_a_gone_client_is_a_connection_error(transport: _Transport | None) -> None:
    """aiohttp's finish_response treats ConnectionError as the client's early disconnect."""
    with pytest.raises(ConnectionError):
        await BytesResponse(BODY, HttpDate()).prepare(_Request(_Writer(transport)))  # type: ignore[arg-type]


def test_header_values_aiohttp_would_refuse_are_refused() -> None:
    assert header_value_ok("abc-123\twith tab")
    assert not header_value_ok("a\r\nInjected: 1")
    assert not header_value_ok("nul\x00")
    assert not header_value_ok("caf\u00e9")  # written by the regular path instead


def test_headers_view_and_regular_response_agree() -> None:
    answer = BytesResponse(BODY, HttpDate())
    answer.request_id = "rid-9"
    answer.extra = EXTRA
    regular_answer = answer.to_response()
    assert regular_answer.body == BODY
    assert regular_answer.headers["x-request-id"] == "rid-9"
    assert regular_answer.headers["Cache-Control"] == "private"
    assert answer.headers["Content-Length"] == str(len(BODY))


def test_a_cache_control_is_in_the_headers_view_and_the_regular_response() -> None:
    answer = BytesResponse(BODY, HttpDate(), "no-store")
    assert answer.headers["Cache-Control"] == "no-store"
    assert answer.to_response().headers["Cache-Control"] == "no-store"
    assert "Cache-Control" not in BytesResponse(BODY, HttpDate()).headers
