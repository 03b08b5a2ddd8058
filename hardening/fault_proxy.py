"""A loopback TCP fault proxy placed between the gateway and the catalog.

Why a proxy and not the emulator's own fault hooks: the emulator answers at the HTTP layer,
while real outages are at the socket layer (resets, silent drops, slow links). The proxy
injects those without touching either side, and its mode can be switched while connections
are open, so the gateway's pooled keep-alive connections are hit too.

Modes:
  pass       forward bytes unchanged
  latency    delay every forwarded chunk by `latency_s` (each direction)
  reset      abort new and existing connections with a TCP RST (SO_LINGER 0)
  blackhole  accept connections and swallow bytes, never answer (a dead route)
  date_skew  forward, but shift every HTTP `Date` header of the answers by `date_offset_s`
             (the catalog's clock is wrong; nothing else about it changes)
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import re
import socket
import struct
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from email.utils import formatdate, parsedate_to_datetime

_CHUNK = 65536


class ProxyMode(enum.StrEnum):
    """What the proxy does with traffic."""

    PASS = "pass"  # noqa: S105 - a mode name, not a password
    LATENCY = "latency"
    RESET = "reset"
    BLACKHOLE = "blackhole"
    DATE_SKEW = "date_skew"


@dataclass
class ProxyStats:
    """Counters for the report and for tests (mutated only on the proxy's loop)."""

    accepted: int = 0
    resets: int = 0
    blackholed: int = 0
    bytes_up: int = 0
    bytes_down: int = 0


_DATE_LINE = re.compile(rb"\r\n(date:[ \t]*)([^\r\n]+)(?=\r\n)", re.IGNORECASE)


class DateRewriter:
    """Shifts the `Date` header lines of an HTTP/1.1 byte stream by a fixed offset.

    A header line split across two reads is held back until its end arrives: only a tail
    after the last CRLF that could still become a `Date` line (or a lone CR) is held, and an
    HTTP message never ends there (headers and chunked bodies end in CRLF CRLF, JSON in `}`).
    The rewritten date has the same length (IMF-fixdate), so Content-Length stays right.
    """

    def __init__(self, offset_s: float) -> None:
        self.offset_s = offset_s
        self._held = b""

    def feed(self, data: bytes) -> bytes:
        # Complete lines first (same length), then what to hold back of the rewritten bytes.
        buf, self._held = _DATE_LINE.sub(self._shift, self._held + data), b""
        cut = buf.rfind(b"\r\n")
        tail = buf[cut + 2:] if cut >= 0 else b""
        if cut >= 0 and (b"date:".startswith(tail[:5].lower())
                         and not buf.endswith(b"\r\n\r\n")):
            # A Date line not yet ended, or a CRLF a Date line may follow: held from the
            # CRLF (the pattern needs it); a blank line (end of headers) is never held.
            self._held, buf = buf[cut:], buf[:cut]
        elif buf.endswith(b"\r"):
            self._held, buf = buf[-1:], buf[:-1]  # half a CRLF
        return buf

    def _shift(self, m: re.Match[bytes]) -> bytes:
        try:
            when = parsedate_to_datetime(m.group(2).decode("ascii")).timestamp()
        except (TypeError, ValueError, IndexError, UnicodeDecodeError):
            return m.group(0)
        shifted = formatdate(when + self.offset_s, usegmt=True).encode("ascii")
        return b"\r\n" + m.group(1) + shifted


@dataclass(eq=False)  # identity-hashed: links live in a set
class _Link:
    """One proxied connection: client side and (once connected) upstream side."""

    client: asyncio.StreamWriter
    upstream: asyncio.StreamWriter | None = None
    tasks: set[asyncio.Task[None]] = field(default_factory=set)
    dates: DateRewriter | None = None  # answers' Date lines, shifted in date_skew mode


def _abort_with_rst(writer: asyncio.StreamWriter) -> None:
    """Close so the peer sees ECONNRESET, not a clean FIN (what a crashed middlebox does)."""
    sock = writer.get_extra_info("socket")
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    writer.transport.abort()


class FaultProxy:
    """Asyncio TCP proxy with a runtime-switchable fault mode.

    Args:
        upstream_host: where to forward.
        upstream_port: where to forward.
        listen_host: bind address (loopback only).
        listen_port: 0 picks a free port; read `port` after `start()`.
    """

    def __init__(
        self,
        upstream_host: str,
        upstream_port: int,
        *,
        listen_host: str = "127.0.0.1",
        listen_port: int = 0,
        connect_timeout_s: float = 5.0,
    ) -> None:
        self._upstream = (upstream_host, upstream_port)
        self._listen = (listen_host, listen_port)
        self._connect_timeout_s = connect_timeout_s
        self._server: asyncio.Server | None = None
        self._links: set[_Link] = set()
        self._handlers: set[asyncio.Task[None]] = set()
        self._mode = ProxyMode.PASS
        self._latency_s = 0.0
        self._date_offset_s = 0.0
        # Set while not blackholed; forwarders wait on it instead of polling the mode.
        self._flowing = asyncio.Event()
        self._flowing.set()
        self.stats = ProxyStats()

    @property
    def port(self) -> int:
        """The bound port (after `start()`)."""
        if self._server is None:
            raise RuntimeError("proxy not started")
        return int(self._server.sockets[0].getsockname()[1])

    @property
    def mode(self) -> ProxyMode:
        return self._mode

    @property
    def open_links(self) -> int:
        """Connections currently proxied (used by leak checks)."""
        return len(self._links)

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._on_client, *self._listen)

    async def close(self) -> None:
        """Stop listening, abort every link and await every handler (nothing leaks)."""
        if self._server is not None:
            self._server.close()
        for link in list(self._links):
            self._drop(link, reset=True)
        handlers = list(self._handlers)
        for task in handlers:
            task.cancel()
        if handlers:
            await asyncio.gather(*handlers, return_exceptions=True)
        if self._server is not None:
            await self._server.wait_closed()
            self._server = None

    def set_mode(self, mode: ProxyMode | str, latency_s: float = 0.0,
                 date_offset_s: float = 0.0) -> None:
        """Switch the fault mode; applies to existing connections too.

        Args:
            mode: the new mode.
            latency_s: added delay per chunk, used in `latency` mode.
            date_offset_s: seconds added to every answer's `Date`, in `date_skew` mode.
        """
        mode = ProxyMode(mode)
        if latency_s < 0:
            raise ValueError("latency_s must be >= 0")
        self._mode = mode
        self._latency_s = latency_s if mode is ProxyMode.LATENCY else 0.0
        self._date_offset_s = date_offset_s if mode is ProxyMode.DATE_SKEW else 0.0
        if mode is ProxyMode.BLACKHOLE:
            self._flowing.clear()
        else:
            self._flowing.set()
        if mode is ProxyMode.RESET:
            # A reset hits pooled keep-alive connections as well, like a crashed peer.
            for link in list(self._links):
                self._drop(link, reset=True)
                self.stats.resets += 1

    async def _on_client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._handlers.add(task)
        link = _Link(client=writer)
        self._links.add(link)
        self.stats.accepted += 1
        try:
            await self._serve_link(link, reader)
        except (OSError, asyncio.IncompleteReadError):
            pass
        finally:
            self._drop(link, reset=False)
            self._handlers.discard(task)

    async def _serve_link(self, link: _Link, reader: asyncio.StreamReader) -> None:
        if self._mode is ProxyMode.RESET:
            self.stats.resets += 1
            _abort_with_rst(link.client)
            return
        if self._mode is ProxyMode.BLACKHOLE:
            self.stats.blackholed += 1
            # A dead route: never connect upstream; swallow until unblocked or the client leaves.
            while not self._flowing.is_set():
                data = await reader.read(_CHUNK)
                if not data:
                    return
        async with asyncio.timeout(self._connect_timeout_s):
            up_reader, up_writer = await asyncio.open_connection(*self._upstream)
        link.upstream = up_writer
        up = asyncio.create_task(self._pump(reader, up_writer, upstream_bound=True))
        down = asyncio.create_task(self._pump(up_reader, link.client, upstream_bound=False,
                                              link=link))
        link.tasks.update((up, down))
        try:
            # Either side closing ends the link (HTTP/1.1 keep-alive has no half-close).
            await asyncio.wait({up, down}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for t in (up, down):
                t.cancel()
            await asyncio.gather(up, down, return_exceptions=True)

    async def _pump(
        self, src: asyncio.StreamReader, dst: asyncio.StreamWriter, *, upstream_bound: bool,
        link: _Link | None = None,
    ) -> None:
        while True:
            data = await src.read(_CHUNK)
            if not data:
                return
            if link is not None and (self._date_offset_s or link.dates is not None):
                if link.dates is None:
                    link.dates = DateRewriter(self._date_offset_s)
                link.dates.offset_s = self._date_offset_s
                data = link.dates.feed(data)
            if self._latency_s > 0:
                await asyncio.sleep(self._latency_s)
            if not self._flowing.is_set():
                # Blackholed mid-connection: the bytes vanish, the peer waits forever
                # (bounded by its own deadline, which is what we are testing).
                continue
            dst.write(data)
            await dst.drain()
            if upstream_bound:
                self.stats.bytes_up += len(data)
            else:
                self.stats.bytes_down += len(data)

    def _drop(self, link: _Link, *, reset: bool) -> None:
        if link not in self._links:
            return
        self._links.discard(link)
        for t in link.tasks:
            t.cancel()
        for w in (link.client, link.upstream):
            if w is None:
                continue
            if reset:
                _abort_with_rst(w)
            else:
                w.close()


class ProxyThread:
    """Run a `FaultProxy` on its own event loop in a thread, for synchronous harness code.

    Why: the harness drives subprocesses and blocking stack calls; the proxy must keep
    forwarding while the harness sleeps or waits on a process.
    """

    def __init__(self, upstream_host: str, upstream_port: int) -> None:
        self._loop = asyncio.new_event_loop()
        self._proxy = FaultProxy(upstream_host, upstream_port)
        self._thread = threading.Thread(
            target=self._loop.run_forever, name="fault-proxy", daemon=True
        )

    def start(self) -> int:
        """Start the thread and the proxy; returns the listening port."""
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self._proxy.start(), self._loop).result(timeout=10)
        return self._proxy.port

    @property
    def port(self) -> int:
        return self._proxy.port

    @property
    def stats(self) -> ProxyStats:
        return self._proxy.stats

    def set_mode(self, mode: ProxyMode | str, latency_s: float = 0.0,
                 date_offset_s: float = 0.0) -> None:
        """Switch mode on the proxy's loop and wait until it applied."""

        async def _apply() -> None:
            self._proxy.set_mode(mode, latency_s, date_offset_s)

        asyncio.run_coroutine_threadsafe(_apply(), self._loop).result(timeout=10)

    def stop(self) -> None:
        """Close the proxy, stop the loop and join the thread (bounded)."""
        if not self._thread.is_alive():
            return
        asyncio.run_coroutine_threadsafe(self._proxy.close(), self._loop).result(timeout=15)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)
        self._loop.close()

    def __enter__(self) -> ProxyThread:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


@contextlib.contextmanager
def fault_proxy(upstream_host: str, upstream_port: int) -> Iterator[ProxyThread]:
    """Context manager form of `ProxyThread`."""
    proxy = ProxyThread(upstream_host, upstream_port)
    proxy.start()
    try:
        yield proxy
    finally:
        proxy.stop()
