"""A minimal HTTP/1.1 keep-alive client over raw asyncio sockets (TCP or Unix).

Why not aiohttp's client for throughput runs: on these 2 shared cores the generator competes
with the server for CPU, and aiohttp's client spends several times more CPU per request than
the trivial servers it must saturate. This client sends a prebuilt request and parses only the
status line and Content-Length, so the generator stays cheap. One connection carries one request
at a time (no pipelining), which is what a closed-loop "user" is.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import cast


class RawHttpError(Exception):
    """The server answered something this minimal client cannot parse, or hung up."""


def build_request(
    method: str, path: str, headers: Mapping[str, str] | None = None, body: bytes = b""
) -> bytes:
    """Serialise one HTTP/1.1 request with keep-alive."""
    lines = [f"{method} {path} HTTP/1.1", "Host: 127.0.0.1", "Connection: keep-alive"]
    for name, value in (headers or {}).items():
        lines.append(f"{name}: {value}")
    if body or method in ("POST", "PUT"):
        lines.append(f"Content-Length: {len(body)}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body


class ResponseParser:
    """Incremental parser of Content-Length-framed HTTP/1.1 responses.

    `feed()` returns every response completed by the new bytes as `(status, body)`.
    """

    def __init__(self) -> None:
        self._buf = bytearray()
        self._status = 0
        self._need = -1  # body bytes still expected; -1 = reading headers

    def feed(self, data: bytes) -> list[tuple[int, bytes]]:
        self._buf += data
        done: list[tuple[int, bytes]] = []
        while True:
            if self._need < 0:
                end = self._buf.find(b"\r\n\r\n")
                if end < 0:
                    return done
                head = bytes(self._buf[:end]).decode("latin-1")
                del self._buf[: end + 4]
                self._status, self._need = _parse_head(head)
            if len(self._buf) < self._need:
                return done
            body = bytes(self._buf[: self._need])
            del self._buf[: self._need]
            done.append((self._status, body))
            self._need = -1


def _parse_head(head: str) -> tuple[int, int]:
    lines = head.split("\r\n")
    parts = lines[0].split(" ", 2)
    if len(parts) < 2 or not parts[0].startswith("HTTP/1."):
        raise RawHttpError(f"bad status line {lines[0][:60]!r}")
    status = int(parts[1])
    length = 0
    for line in lines[1:]:
        name, _, value = line.partition(":")
        lname = name.strip().lower()
        if lname == "content-length":
            length = int(value.strip())
        elif lname == "transfer-encoding" and "chunked" in value.lower():
            raise RawHttpError("chunked responses are not supported by the raw client")
    return status, length


class RawHttpConnection(asyncio.Protocol):
    """One keep-alive connection; `request()` sends prebuilt bytes and awaits the response."""

    def __init__(self) -> None:
        self._parser = ResponseParser()
        self._transport: asyncio.Transport | None = None
        self._waiter: asyncio.Future[tuple[int, bytes]] | None = None
        self.closed = False

    @classmethod
    async def open(cls, target: str) -> RawHttpConnection:
        """Connect to `unix:/path` or `host:port`."""
        loop = asyncio.get_running_loop()
        conn = cls()
        if target.startswith("unix:"):
            await loop.create_unix_connection(lambda: conn, target[len("unix:") :])
        else:
            host, _, port = target.rpartition(":")
            await loop.create_connection(lambda: conn, host, int(port))
        return conn

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports implement the interface without subclassing asyncio.Transport.
        self._transport = cast(asyncio.Transport, transport)

    def data_received(self, data: bytes) -> None:
        try:
            responses = self._parser.feed(data)
        except (RawHttpError, ValueError) as exc:
            self._fail(RawHttpError(str(exc)))
            return
        for response in responses:
            waiter, self._waiter = self._waiter, None
            if waiter is not None and not waiter.done():
                waiter.set_result(response)

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self._fail(RawHttpError("connection closed by server"))

    def _fail(self, exc: Exception) -> None:
        waiter, self._waiter = self._waiter, None
        if waiter is not None and not waiter.done():
            waiter.set_exception(exc)
        if self._transport is not None:
            self._transport.close()

    async def request(self, raw: bytes) -> tuple[int, bytes]:
        """Send one request; returns (status, body).

        Raises:
            RawHttpError: if the connection is closed or the answer is unparseable.
        """
        if self.closed or self._transport is None:
            raise RawHttpError("connection is closed")
        waiter: asyncio.Future[tuple[int, bytes]] = asyncio.get_running_loop().create_future()
        self._waiter = waiter
        self._transport.write(raw)
        return await waiter

    def close(self) -> None:
        if self._transport is not None:
            self._transport.close()
        self.closed = True
