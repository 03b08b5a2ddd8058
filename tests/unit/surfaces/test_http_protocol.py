"""The request handler that answers at once (gateway/surfaces/http_protocol.py), driven
byte by byte through a fake transport: which requests are answered inside `data_received`,
that those answers are written after the batch of reads and before anything else of their
connection (its next message, its close), that answers keep the requests' order when some need
an await, that the rest of an unfinished request runs in its own context, and that everything
else goes aiohttp's own way.

The pipeline is replaced by a fake `start`: what it returns decides the path (`/now/..`: a
BytesResponse, `/later/..`: an Unfinished, `/raise`: an exception); aiohttp's handler (`serve`)
answers `served <path>`. test_http_hot_path.py runs the real pipeline through it.
"""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import Coroutine
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import make_mocked_request

from gateway.surfaces import http_protocol
from gateway.surfaces.bytes_response import BytesResponse, HttpDate
from gateway.surfaces.http_protocol import AnsweringRequestHandler, AnsweringServer

_var: contextvars.ContextVar[str] = contextvars.ContextVar("test_http_protocol", default="")


class FakeTransport(asyncio.Transport):
    """Records writes; `buffered` is what `get_write_buffer_size` reports."""

    def __init__(self) -> None:
        super().__init__()
        self.written = bytearray()
        self.buffered = 0
        self.closed = False

    def write(self, data: bytes | bytearray | memoryview) -> None:
        if self.closed:  # as uvloop's: a closed transport takes no more bytes
            raise RuntimeError("write to a closed transport")
        self.written += data

    def writelines(self, data: Any) -> None:
        for chunk in data:
            self.write(chunk)

    def get_write_buffer_size(self) -> int:
        return self.buffered

    def is_closing(self) -> bool:
        return self.closed

    def close(self) -> None:
        self.closed = True

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return default

    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass


class Later:
    """An Unfinished: its run awaits `release`, then answers with the context var it sees."""

    def __init__(self, name: str, token: contextvars.Token[str]) -> None:
        self.name = name
        self.token = token
        self.release = asyncio.Event()
        self.closed = False

    async def _run(self) -> web.StreamResponse:
        if self.name.startswith("timeout"):  # a deadline inside the rest: a task's timeout
            try:
                async with asyncio.timeout(0.01):
                    await self.release.wait()
            except TimeoutError:
                _var.reset(self.token)
                return web.Response(text=f"later {self.name} timed out")
        await asyncio.wait_for(self.release.wait(), 5)
        seen = _var.get()
        _var.reset(self.token)  # a token of another context would raise ValueError
        return web.Response(text=f"later {self.name} saw {seen}")

    def run(self) -> Coroutine[Any, Any, web.StreamResponse]:
        return self._run()

    def close(self) -> None:
        self.closed = True
        _var.reset(self.token)


class Pipeline:
    """The fake pipeline: `start` by path, `serve` for what aiohttp's handler runs."""

    def __init__(self) -> None:
        self.started: list[str] = []
        self.served: list[str] = []
        self.later: dict[str, Later] = {}
        self.date = HttpDate()

    def ready(self, method: str, raw_target: str) -> bool:
        return not raw_target.startswith("/cold/")

    def start(self, request: web.BaseRequest) -> Any:
        path = request.path
        self.started.append(path)
        kind, _, name = path[1:].partition("/")
        if kind == "now":
            answer = BytesResponse(f'{{"now":"{name}"}}'.encode(), self.date, "no-store")
            answer.request_id = name
            return answer
        if kind == "later":
            later = self.later[name] = Later(name, _var.set(name))
            return later
        raise RuntimeError("the steps failed")

    async def serve(self, request: web.BaseRequest) -> web.StreamResponse:
        self.served.append(request.path)
        if request.can_read_body:
            await request.read()
        return web.Response(text=f"served {request.path}")


class Conn:
    """One connection of an AnsweringServer over a FakeTransport (a new server, or `server`'s
    next connection)."""

    def __init__(self, pipeline: Pipeline, server: AnsweringServer | None = None) -> None:
        self.pipeline = pipeline
        self.server = server or AnsweringServer(pipeline.serve, start=pipeline.start,
                                                ready=pipeline.ready, access_log=None)
        handler = self.server()
        assert isinstance(handler, AnsweringRequestHandler)
        self.handler = handler
        self.transport = FakeTransport()
        handler.connection_made(self.transport)

    async def idle(self) -> None:
        """Let start() run until it waits for the next message."""
        for _ in range(50):
            await asyncio.sleep(0)
        assert self.handler._waiter is not None

    def send(self, data: bytes) -> None:
        self.handler.data_received(data)

    async def answered(self, count: int = 1, rounds: int = 100) -> None:
        """Let the loop run until `count` answers were written (or `rounds` iterations)."""
        for _ in range(rounds):
            await asyncio.sleep(0)
            if len(self.answers()) >= count:
                return

    def answers(self) -> list[str]:
        """The bodies written so far, in order."""
        out = []
        raw = bytes(self.transport.written)
        while raw:
            head, _, rest = raw.partition(b"\r\n\r\n")
            length = int(next(line.split(b":")[1] for line in head.split(b"\r\n")
                              if line.lower().startswith(b"content-length")))
            out.append(rest[:length].decode())
            raw = rest[length:]
        return out

    def close(self) -> None:
        self.handler.connection_lost(None)


def get(path: str, extra: str = "") -> bytes:
    return f"GET {path} HTTP/1.1\r\nHost: localhost\r\n{extra}\r\n".encode()


@pytest.fixture
async def conn() -> Any:
    c = Conn(Pipeline())
    await c.idle()
    yield c
    c.close()


def test_the_installed_aiohttp_has_what_the_handler_needs() -> None:
    # The daemon's lock pins aiohttp; a version without these internals would silently serve
    # every request the slow way: this fails instead.
    assert http_protocol.supported()


async def test_a_request_whose_steps_need_no_await_is_answered_inside_data_received(
        conn: Conn) -> None:
    conn.send(get("/now/a"))
    # No loop iteration ran: the batch's first answer was written in the callback itself.
    assert conn.answers() == ['{"now":"a"}']
    assert conn.pipeline.served == []
    assert b"x-request-id: a\r\n" in conn.transport.written
    conn.send(get("/now/b"))  # a second read in the same batch: its answer waits for the end
    assert conn.pipeline.started == ["/now/a", "/now/b"]
    assert conn.answers() == ['{"now":"a"}']
    await asyncio.sleep(0)  # one pass of the loop: no task step, only the outbox
    assert conn.answers() == ['{"now":"a"}', '{"now":"b"}']
    await conn.idle()  # start() still waits for the next message
    assert not conn.transport.closed


async def test_answers_to_one_batch_of_reads_are_written_after_all_the_reads() -> None:
    # Why: a write spaced from the next by a request's work finds the client asleep again,
    # and waking it is charged to the server (http_protocol's docstring).
    pipeline = Pipeline()
    first = Conn(pipeline)
    second = Conn(pipeline, first.server)  # one server: one outbox for both connections
    await first.idle()
    await second.idle()
    first.send(get("/now/a"))  # the batch's first answer: written at once
    second.send(get("/now/b"))
    first.send(get("/now/c"))  # the client pipelined c after a
    assert first.answers() == ['{"now":"a"}']
    assert second.answers() == []
    await asyncio.sleep(0)
    assert first.answers() == ['{"now":"a"}', '{"now":"c"}']
    assert second.answers() == ['{"now":"b"}']
    second.send(get("/now/d"))  # a new batch: its first answer goes at once again
    assert second.answers() == ['{"now":"b"}', '{"now":"d"}']
    first.close()
    second.close()


async def test_a_target_the_pipeline_does_not_call_ready_goes_aiohttps_way(
        conn: Conn) -> None:
    conn.send(get("/cold/a"))
    assert conn.pipeline.started == []
    await conn.answered()
    assert conn.answers() == ["served /cold/a"]


async def test_an_answer_at_once_restarts_the_idle_timer(conn: Conn) -> None:
    before = conn.handler._next_keepalive_close_time
    await asyncio.sleep(0.01)
    conn.send(get("/now/a"))
    assert conn.handler._next_keepalive_close_time > before
    assert conn.handler._keepalive_handle is not None


async def test_an_unfinished_request_runs_in_its_turn_and_in_its_own_context(
        conn: Conn) -> None:
    conn.send(get("/later/x"))
    assert conn.answers() == []
    later = conn.pipeline.later["x"]
    assert _var.get() == ""  # the steps' context is the request's, not the caller's
    later.release.set()
    await conn.answered()
    assert conn.answers() == ["later x saw x"]
    assert conn.pipeline.served == []  # the rest of the steps answered, not a second run
    assert conn.pipeline.started == ["/later/x"]


async def test_the_rest_of_a_request_can_time_out_like_any_handler(conn: Conn) -> None:
    # asyncio.timeout needs the task it runs in: the rest's steps run in start()'s handler
    # task, and its cancellation reaches them where they wait.
    conn.send(get("/later/timeout1"))
    for _ in range(200):
        await asyncio.sleep(0.001)
        if conn.answers():
            break
    assert conn.answers() == ["later timeout1 timed out"]
    await conn.idle()
    conn.send(get("/now/a"))
    assert conn.answers()[-1] == '{"now":"a"}'


async def test_pipelined_requests_are_answered_in_order_when_one_needs_an_await(
        conn: Conn) -> None:
    conn.send(get("/now/a") + get("/later/b") + get("/now/c"))
    # a at once; b needs an await; c must not overtake b, so it goes aiohttp's way.
    assert conn.answers() == ['{"now":"a"}']
    conn.pipeline.later["b"].release.set()
    await conn.answered(3, rounds=200)
    assert conn.answers() == ['{"now":"a"}', "later b saw b", "served /now/c"]
    # Once idle again, the next one is answered at once.
    await conn.idle()
    conn.send(get("/now/d"))
    assert conn.answers()[-1] == '{"now":"d"}'


@pytest.mark.parametrize(("request_bytes", "why"), [
    (get("/now/a", "Connection: close\r\n"), "closes the connection"),
    (b"POST /now/a HTTP/1.1\r\nHost: localhost\r\nContent-Length: 2\r\n\r\n{}", "has a body"),
    (b"GET /now/a HTTP/1.0\r\nHost: localhost\r\n\r\n", "HTTP/1.0 without keep-alive"),
    (get("/now/a", "Connection: Upgrade\r\nUpgrade: websocket\r\n"), "an upgrade"),
])
async def test_requests_that_are_not_plain_keep_alive_reads_go_aiohttps_way(
        conn: Conn, request_bytes: bytes, why: str) -> None:
    conn.send(request_bytes)
    assert conn.pipeline.started == [], why
    await conn.answered()
    assert conn.answers() == ["served /now/a"], why


async def test_a_connection_with_bytes_still_buffered_waits_for_drain_the_usual_way(
        conn: Conn) -> None:
    conn.transport.buffered = 1  # back-pressure: the at-once path must not pile up writes
    conn.send(get("/now/a"))
    assert conn.answers() == []
    assert conn.pipeline.started == []
    conn.transport.buffered = 0
    await conn.answered()
    assert conn.answers() == ["served /now/a"]


async def test_a_parse_error_is_answered_400_by_aiohttp(conn: Conn) -> None:
    conn.send(b"NOT HTTP AT ALL\r\n\r\n")
    await conn.answered()
    assert b" 400 Bad Request\r\n" in conn.transport.written
    assert conn.pipeline.started == []


async def test_steps_that_raise_become_aiohttps_500_in_order(conn: Conn) -> None:
    conn.send(get("/raise/x"))
    await conn.answered()
    assert conn.transport.written.startswith(b"HTTP/1.1 500")


async def test_a_lost_connection_closes_the_rest_of_a_queued_request() -> None:
    conn = Conn(Pipeline())
    await conn.idle()
    conn.send(get("/now/a") + get("/later/b") + get("/later/c"))
    # b began (its steps set the context variable); c was only queued behind it.
    assert conn.pipeline.started == ["/now/a", "/later/b"]
    later = conn.pipeline.later["b"]
    conn.close()  # start() never runs b: its rest is closed in its own context
    assert later.closed
    assert _var.get() == ""


async def holding() -> Conn:
    """A connection whose answer to b waits for the end of the batch (a, the batch's first,
    was written at once). Not a fixture: the loop would run the batch's end between it and
    the test."""
    conn = Conn(Pipeline())
    await conn.idle()
    conn.send(get("/now/a"))
    conn.send(get("/now/b"))
    assert conn.answers() == ['{"now":"a"}']
    return conn


@pytest.mark.parametrize("closing", ["shutdown", "idle timer", "close", "client end of stream"])
async def test_a_held_answer_is_written_before_its_connection_closes(closing: str) -> None:
    # Each way a connection is closed while its answer waits for the end of the batch: the
    # answer goes out first (the fake transport, like uvloop's, refuses writes once closed).
    conn = await holding()
    if closing == "shutdown":
        await conn.handler.shutdown(1.0)
    elif closing == "idle timer":
        conn.handler._next_keepalive_close_time = 0.0
        conn.handler._process_keepalive()
    elif closing == "close":
        conn.handler.close()
    else:
        conn.handler.eof_received()
    assert conn.answers() == ['{"now":"a"}', '{"now":"b"}'], closing
    await asyncio.sleep(0)  # the outbox's own pass then finds nothing left to write
    assert conn.answers() == ['{"now":"a"}', '{"now":"b"}'], closing
    conn.close()


async def test_a_held_answer_goes_out_before_aiohttp_runs_the_next_message() -> None:
    # start() runs its next message through `_handle`: whatever the loop's order, the answer
    # held for the message before it reaches the wire first.
    conn = await holding()
    served = conn.handler._handle(make_mocked_request("GET", "/cold/x"))
    assert conn.answers() == ['{"now":"a"}', '{"now":"b"}']
    served.close()
    conn.close()


async def test_a_lost_connection_drops_its_held_answers() -> None:
    conn = await holding()
    conn.close()  # the peer is gone (connection_lost): b is not written, now or later
    await asyncio.sleep(0)  # the outbox's pass writes nothing and raises nothing
    assert conn.answers() == ['{"now":"a"}']
