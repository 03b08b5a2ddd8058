"""A 200 JSON answer whose whole HTTP message is written as one prebuilt byte string.

The credential routes answer the same pre-rendered body over and over (render.RenderedBody).
aiohttp's `web.Response` still builds a header multidict, a content-type parse, a status line,
a Content-Length, Date, Server and Connection per answer, serializes them and writes head and
body through its payload writer: about a sixth of a cached credential answer. aiohttp's
request handler needs three things of what a handler returns: `prepare(request)`,
`write_eof()` and `keep_alive` (web_protocol.RequestHandler.finish_response and start), so
this answer provides them and writes the same bytes aiohttp would (same headers, same
Connection rules for HTTP/1.0 and 1.1, no body for HEAD), with the same back-pressure (the
payload writer's `drain`, awaited when bytes stay buffered).

Only for 200s with a body known up front: everything else stays a `web.Response`.
"""

from __future__ import annotations

import re
import time
from collections.abc import Mapping
from email.utils import formatdate
from types import MappingProxyType

from aiohttp import web
from aiohttp.http import SERVER_SOFTWARE, HttpVersion, HttpVersion10, HttpVersion11
from multidict import CIMultiDict, CIMultiDictProxy

_SERVER = f"Server: {SERVER_SOFTWARE}\r\n".encode()
_TYPE = b"Content-Type: application/json\r\nContent-Length: "
# `prepare`'s hot path: a keep-alive HTTP/1.1 answer with a body (Content-Length, the
# Cache-Control line, [x-request-id,] Date line, body), the bytes `_message` writes for it.
_HOT = (b"HTTP/1.1 200 OK\r\n" + _TYPE + b"%d\r\n%bx-request-id: %b\r\n%b" + _SERVER
        + b"\r\n%b")
_HOT_NO_ID = b"HTTP/1.1 200 OK\r\n" + _TYPE + b"%d\r\n%b%b" + _SERVER + b"\r\n%b"
# The Cache-Control lines of the values the handlers pass (others are formatted per answer).
_CACHE_LINES: Mapping[str | None, bytes] = MappingProxyType(
    {None: b"", "no-store": b"Cache-Control: no-store\r\n"})
# The characters aiohttp's header serializer refuses (http_writer._FORBIDDEN_HEADER_CHARS_RE).
_FORBIDDEN = re.compile(r"[\x00-\x08\x0a-\x1f\x7f]")


class HttpDate:
    """The `Date` header line, formatted at most once per second (as aiohttp caches it)."""

    __slots__ = ("_line", "_second")

    def __init__(self) -> None:
        self._second = -1
        self._line = b""

    def line(self) -> bytes:
        now = int(time.time())  # wall clock on purpose: Date is the wall time
        if now != self._second:
            self._line = f"Date: {formatdate(now, usegmt=True)}\r\n".encode()
            self._second = now
        return self._line


class BytesResponse:
    """A 200 `application/json` answer with its body rendered beforehand.

    `request_id` and `extra` (header name/value pairs) are set by the pipeline before the
    answer is written. Header values must pass `header_value_ok` (the pipeline falls back to a
    `web.Response` otherwise). `cache_control` is the handler's `Cache-Control` (a credential
    answer of the native and AWS surfaces says `no-store`: no proxy or client cache may keep
    storage keys); None writes none (the Lakekeeper surface's own comes in `extra`).
    """

    __slots__ = ("_cache_line", "_date", "_sent", "body", "cache_control", "extra",
                 "keep_alive", "request_id")

    status = 200
    reason = "OK"
    __http_exception__ = False

    def __init__(self, body: bytes, date: HttpDate, cache_control: str | None = None) -> None:
        self.body = body
        self.cache_control = cache_control
        line = _CACHE_LINES.get(cache_control)
        self._cache_line = (line if line is not None
                            else f"Cache-Control: {cache_control}\r\n".encode())
        self.request_id = ""
        self.extra: tuple[tuple[str, str], ...] = ()
        self.keep_alive: bool | None = None
        self._date = date
        self._sent = False

    @property
    def body_length(self) -> int:
        """What aiohttp's access logger prints as the body size."""
        return len(self.body) if self._sent else 0

    @property
    def headers(self) -> CIMultiDictProxy[str]:
        """The answer's headers, for access loggers and tests (the hot path never builds it)."""
        out: CIMultiDict[str] = CIMultiDict()
        out["Content-Type"] = "application/json"
        out["Content-Length"] = str(len(self.body))
        if self.cache_control is not None:
            out["Cache-Control"] = self.cache_control
        if self.request_id:
            out["x-request-id"] = self.request_id
        for name, value in self.extra:
            out[name] = value
        return CIMultiDictProxy(out)

    def to_response(self) -> web.Response:
        """The same answer as an aiohttp `web.Response` (for hosts that need one)."""
        headers = dict(self.extra)
        if self.cache_control is not None:
            headers["Cache-Control"] = self.cache_control
        if self.request_id:
            headers["x-request-id"] = self.request_id
        return web.Response(body=self.body, content_type="application/json", headers=headers)

    async def prepare(self, request: web.BaseRequest) -> None:
        """Write status line, headers and body in one transport write, then drain."""
        if self._sent:
            return
        self.send(request)
        # The writer's back-pressure: drain() waits only while the protocol is paused, which
        # it is only with bytes still buffered; most answers leave in the write itself, and
        # then no drain coroutine is built.
        writer = request.writer
        transport = writer.transport
        if transport is not None and transport.get_write_buffer_size():
            await writer.drain()

    def send(self, request: web.BaseRequest) -> None:
        """Write status line, headers and body in one transport write (`prepare` without its
        drain).

        Raises:
            ConnectionResetError: the transport is closing.
        """
        message = self.render(request)
        transport = request.writer.transport
        if transport is None or transport.is_closing():
            raise ConnectionResetError("Cannot write to closing transport")
        transport.write(message)

    def render(self, request: web.BaseRequest) -> bytes:
        """The whole message answering `request`, marked as sent: what `send` writes (and
        what a handler that writes after its batch of reads holds: http_protocol)."""
        self._sent = True
        keep_alive = self.keep_alive = request.keep_alive
        version = request.version
        body = self.body
        if (keep_alive and version == HttpVersion11 and not self.extra
                and request.method != "HEAD"):
            # The hot path (a keep-alive HTTP/1.1 GET): one formatting, the same bytes.
            return (_HOT % (len(body), self._cache_line, self.request_id.encode(),
                            self._date.line(), body) if self.request_id else
                    _HOT_NO_ID % (len(body), self._cache_line, self._date.line(), body))
        return self._message(keep_alive, version, request.method != "HEAD")

    def _message(self, keep_alive: bool, version: HttpVersion, with_body: bool) -> bytes:
        """The whole message, for every case `prepare`'s hot path does not cover."""
        body = self.body
        parts = [
            b"HTTP/1.1 200 OK\r\n" if version == HttpVersion11
            else f"HTTP/{version[0]}.{version[1]} 200 OK\r\n".encode(),
            _TYPE, str(len(body)).encode(), b"\r\n", self._cache_line,
        ]
        if self.request_id:
            parts += (b"x-request-id: ", self.request_id.encode(), b"\r\n")
        for name, value in self.extra:
            parts += (name.encode(), b": ", value.encode(), b"\r\n")
        parts += (self._date.line(), _SERVER)
        if keep_alive:
            if version == HttpVersion10:
                parts.append(b"Connection: keep-alive\r\n")
        elif version == HttpVersion11:
            parts.append(b"Connection: close\r\n")
        parts.append(b"\r\n")
        if with_body:
            parts.append(body)
        return b"".join(parts)

    async def write_eof(self, data: bytes = b"") -> None:
        """Nothing left to write: `prepare` wrote the whole message."""


def header_value_ok(value: str) -> bool:
    """Whether `value` may be written as a header value (aiohttp's own rule, plus ASCII)."""
    return value.isascii() and _FORBIDDEN.search(value) is None

