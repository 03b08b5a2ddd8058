"""The loopback fault proxy: each mode against a real echo server on 127.0.0.1."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator

import pytest

from hardening.fault_proxy import DateRewriter, FaultProxy, ProxyMode, ProxyThread
from tests.rawsocket import assert_silent, exchange, open_echoed


class EchoServer:
    """Real TCP echo server that counts the connections it accepted."""

    def __init__(self) -> None:
        self.accepted = 0
        self.server: asyncio.Server | None = None
        self._writers: set[asyncio.StreamWriter] = set()

    async def start(self) -> int:
        self.server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        return int(self.server.sockets[0].getsockname()[1])

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.accepted += 1
        self._writers.add(writer)
        try:
            while data := await reader.read(4096):
                writer.write(data)
                await writer.drain()
        except OSError:
            pass
        finally:
            self._writers.discard(writer)
            writer.close()

    async def close(self) -> None:
        assert self.server is not None
        self.server.close()
        for w in list(self._writers):
            w.close()
        await self.server.wait_closed()


@pytest.fixture
async def echo() -> AsyncIterator[EchoServer]:
    server = EchoServer()
    await server.start()
    yield server
    await server.close()


@pytest.fixture
async def proxy(echo: EchoServer) -> AsyncIterator[FaultProxy]:
    assert echo.server is not None
    port = int(echo.server.sockets[0].getsockname()[1])
    p = FaultProxy("127.0.0.1", port)
    await p.start()
    yield p
    await p.close()


async def roundtrip(port: int, payload: bytes) -> bytes:
    return await exchange(port, payload, exactly=len(payload))


async def test_pass_mode_forwards_bytes_both_ways(proxy: FaultProxy) -> None:
    assert await roundtrip(proxy.port, b"hello lakegate") == b"hello lakegate"
    assert proxy.stats.bytes_up == len(b"hello lakegate")
    assert proxy.stats.bytes_down == len(b"hello lakegate")


async def test_reset_mode_resets_new_connections(proxy: FaultProxy, echo: EchoServer) -> None:
    proxy.set_mode(ProxyMode.RESET)
    with pytest.raises((ConnectionResetError, asyncio.IncompleteReadError)):
        await roundtrip(proxy.port, b"x")
    assert echo.accepted == 0
    assert proxy.stats.resets == 1


async def test_switching_to_reset_resets_open_keepalive_connections(proxy: FaultProxy) -> None:
    reader, writer = await open_echoed(proxy.port, b"ping")
    proxy.set_mode("reset")
    with pytest.raises((ConnectionResetError, asyncio.IncompleteReadError, BrokenPipeError)):
        async with asyncio.timeout(5):
            await reader.readexactly(1)
    writer.close()
    assert proxy.open_links == 0


async def test_blackhole_swallows_requests_and_never_reaches_upstream(
    proxy: FaultProxy, echo: EchoServer
) -> None:
    proxy.set_mode(ProxyMode.BLACKHOLE)
    reader, writer = await asyncio.open_connection("127.0.0.1", proxy.port)
    writer.write(b"anyone there?")
    await writer.drain()
    await assert_silent(reader)
    writer.close()
    assert echo.accepted == 0
    assert proxy.stats.blackholed == 1


async def test_blackhole_drops_bytes_on_already_open_connections(proxy: FaultProxy) -> None:
    reader, writer = await open_echoed(proxy.port, b"a")
    proxy.set_mode(ProxyMode.BLACKHOLE)
    writer.write(b"b")
    await writer.drain()
    await assert_silent(reader)
    writer.close()


async def test_back_to_pass_after_blackhole_serves_new_connections(proxy: FaultProxy) -> None:
    proxy.set_mode(ProxyMode.BLACKHOLE)
    proxy.set_mode(ProxyMode.PASS)
    assert await roundtrip(proxy.port, b"again") == b"again"


async def test_latency_mode_holds_bytes_back_for_the_configured_delay(proxy: FaultProxy) -> None:
    proxy.set_mode(ProxyMode.LATENCY, latency_s=30.0)
    reader, writer = await asyncio.open_connection("127.0.0.1", proxy.port)
    writer.write(b"slow")
    await writer.drain()
    # Not a timing measurement: a 30 s delay means nothing can arrive in the first moments.
    await assert_silent(reader)
    writer.close()
    proxy.set_mode(ProxyMode.PASS)
    assert await roundtrip(proxy.port, b"fast") == b"fast"


ANSWER = (b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nDate: Wed, 25 Nov 2026 18:40:23 GMT\r\n"
          b"Server: x\r\n\r\n{}")


async def test_date_skew_mode_shifts_the_date_header_and_nothing_else(
    proxy: FaultProxy,
) -> None:
    proxy.set_mode(ProxyMode.DATE_SKEW, date_offset_s=-600)
    got = await roundtrip(proxy.port, ANSWER)  # the echo server plays the catalog
    assert got == ANSWER.replace(b"18:40:23", b"18:30:23")
    proxy.set_mode(ProxyMode.PASS)
    assert await roundtrip(proxy.port, ANSWER) == ANSWER


@pytest.mark.parametrize("cut", range(1, len(ANSWER)))
def test_a_date_line_split_across_reads_is_still_shifted(cut: int) -> None:
    rewriter = DateRewriter(600)
    out = rewriter.feed(ANSWER[:cut]) + rewriter.feed(ANSWER[cut:])
    assert out == ANSWER.replace(b"25 Nov 2026 18:40:23", b"25 Nov 2026 18:50:23")


def test_a_message_end_is_never_held_back() -> None:
    rewriter = DateRewriter(120)
    assert rewriter.feed(ANSWER) == ANSWER.replace(b"18:40:23", b"18:42:23")
    chunked_end = b"0\r\n\r\n"
    assert rewriter.feed(chunked_end) == chunked_end


async def test_upstream_down_closes_client_connection(echo: EchoServer) -> None:
    # Bind-and-close to get a port nobody listens on.
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    dead_port = s.getsockname()[1]
    s.close()
    p = FaultProxy("127.0.0.1", dead_port)
    await p.start()
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", p.port)
        writer.write(b"x")
        async with asyncio.timeout(5):
            assert await reader.read(1) == b""
        writer.close()
    finally:
        await p.close()


async def test_close_aborts_every_link_and_leaves_no_handler_tasks(proxy: FaultProxy) -> None:
    conns = [await open_echoed(proxy.port, b"k") for _ in range(5)]
    assert proxy.open_links == 5
    before = {t for t in asyncio.all_tasks() if t is not asyncio.current_task()}
    await proxy.close()
    assert proxy.open_links == 0
    after = {t for t in asyncio.all_tasks() if t is not asyncio.current_task() and not t.done()}
    assert len(after) < len(before)
    assert not any("_on_client" in repr(t.get_coro()) for t in after)
    for _, writer in conns:
        writer.close()


def test_invalid_mode_and_negative_latency_are_rejected() -> None:
    p = FaultProxy("127.0.0.1", 1)
    with pytest.raises(ValueError, match="drop"):
        p.set_mode("drop")
    with pytest.raises(ValueError, match="latency_s"):
        p.set_mode(ProxyMode.LATENCY, latency_s=-1)


def test_proxy_thread_serves_blocking_clients_and_switches_modes() -> None:
    upstream = socket.create_server(("127.0.0.1", 0))
    upstream.settimeout(5)
    port = upstream.getsockname()[1]
    with ProxyThread("127.0.0.1", port) as proxy:
        client = socket.create_connection(("127.0.0.1", proxy.port), timeout=5)
        conn, _ = upstream.accept()
        conn.settimeout(5)
        client.sendall(b"hi")
        assert conn.recv(2) == b"hi"
        conn.sendall(b"yo")
        assert client.recv(2) == b"yo"
        proxy.set_mode(ProxyMode.RESET)
        with pytest.raises(ConnectionResetError):
            client.recv(1)
        client.close()
        conn.close()
    upstream.close()
