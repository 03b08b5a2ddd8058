"""aiohttp's HTTP/1.1 request handler, answering at once the requests that need no await.

Why: aiohttp runs every request the same way. The parser queues the message and wakes the
connection's `start()` task through a future; `start()` builds the request and a new task for
the handler (Python 3.11 has no eager tasks); the handler's answer is prepared and written in
that task; `start()` resumes once it is done. That is three task steps, two futures and four
coroutine frames per request, a third of the CPU of a cached credential answer served by
aiohttp. A confirmed cache hit needs none of it: the pipeline's steps finish without awaiting
(`HttpPipeline.start`), so `data_received` runs them for the message and renders the prebuilt
answer in the same callback.

Of the answers to one batch of socket reads, only the first is written in its callback; the
others wait until the loop has run the whole batch (`Outbox`) and then go out back to back, as
aiohttp's own answers do (handler tasks write them, and tasks run after the reads). Why: on
loopback a write that reaches a client asleep in its poll wakes it, and the kernel charges the
wake-up to the writer. Written in each read's callback, the writes are spaced by the time a
request takes, and the client is back asleep before each next one. At 64 callers the serving
thread spent 9.7 us of kernel time per request against the trivial aiohttp server's 6.9, and
37.9 against 31.5 us of CPU in all (`python -m loadtest.cpu`); with the answers held, 28.6
against 31.4. The first goes at once because it wakes the client soonest, and a lone caller's
answer has nothing to wait for: held, it cost a loop pass (0.96 of the trivial server's rate
at one caller, against 1.01). A held answer goes out before anything else of its connection:
before aiohttp runs the connection's next message, and before the connection closes (`close`
and `force_close`, which shutdown and the idle timer call, and the client's end of stream).
A lost connection drops it.

Everything else takes aiohttp's own way. A message is answered at once only when:
- the connection is idle (`start()` waits for a message, none is queued, no handler runs), so
  answers never overtake each other;
- it is a keep-alive request without a body and without an upgrade (a message that closes the
  connection, a body or an upgrade go the usual way, as does a parse error);
- the last request for its exact target was answered without an await (`HttpPipeline.ready`):
  a target whose requests await (a cold herd of misses) would only begin its steps here and
  finish them in a task, more work and more live objects per waiter for no gain;
- the transport's write buffer is empty (a connection with bytes still buffered goes the way
  that waits for `drain`: back-pressure holds; the outbox holds at most the answers to one
  batch of reads), and no access logger is configured.
When the steps need an await after all (a miss, a policy decision to make, an error answer to
prepare), the message is queued for `start()` with the request already built and the rest of
the steps (`Unfinished`): `start()` then runs it as it would any handler, in its turn, with
aiohttp's error handling, keep-alive and shutdown draining; each step of the rest runs in the
request's own context (`_InContext`), since the steps set and reset context variables.

This relies on `RequestHandler` internals (aiohttp 3.14, the version requirements/daemon.lock
pins). `supported()` checks them once; an aiohttp without them gets its plain handler.
"""

from __future__ import annotations

import asyncio
import contextvars
from collections import deque
from collections.abc import Callable, Coroutine, Generator
from typing import Any, NamedTuple, Protocol, cast

from aiohttp import web
from aiohttp.http import HttpProcessingError, StreamWriter
from aiohttp.streams import EMPTY_PAYLOAD, StreamReader
from aiohttp.web_protocol import RequestHandler, _ErrInfo

from gateway.surfaces.bytes_response import BytesResponse

# The RequestHandler (and BaseProtocol) attributes this handler reads or sets.
_INTERNALS = (
    "_messages", "_waiter", "_parser", "_payload_parser", "_upgraded", "_message_tail",
    "_force_close", "_close", "_request_count", "_manager", "_request_factory",
    "_request_handler", "_task_handler", "_keepalive", "_keepalive_handle",
    "_next_keepalive_close_time", "_keepalive_timeout", "_logging_enabled",
    "_max_msg_queue_size", "_buffer_paused",
)


class Unfinished(Protocol):
    """The rest of a request whose steps need an await (`http_pipeline.Unfinished`)."""

    def run(self) -> Coroutine[Any, Any, web.StreamResponse]:
        """The rest of the steps, as a coroutine (run once)."""

    def close(self) -> None:
        """Abandon the rest (the connection is gone): close what was started."""


# `HttpPipeline.start`: the answer, or the rest of the steps.
Start = Callable[[web.BaseRequest], "BytesResponse | web.StreamResponse | Unfinished"]
# `HttpPipeline.ready`: whether a (method, raw target) is worth trying at once.
Ready = Callable[[str, str], bool]


def supported() -> bool:
    """Whether the installed aiohttp has the request handler internals this handler uses."""
    slots: set[str] = set()
    for cls in RequestHandler.__mro__:
        slots.update(getattr(cls, "__slots__", ()))
    return (all(name in slots for name in _INTERNALS)
            and callable(getattr(RequestHandler, "_pause_reading_for_buffer", None))
            and callable(getattr(RequestHandler, "_process_keepalive", None)))


class _Early(NamedTuple):
    """A message whose steps began in `data_received`, queued for `start()` to finish."""

    message: Any  # the parser's RawRequestMessage (the C parser has its own class)
    request: web.BaseRequest
    started: web.StreamResponse | Unfinished  # an answer to prepare, or the rest to run
    context: contextvars.Context


class AnsweringRequestHandler(RequestHandler):
    """`RequestHandler` that answers an idle connection's request at once when it can (see
    the module docstring). `start` is `HttpPipeline.start`; the server's handler (`serve`)
    still answers every request `start()` runs."""

    __slots__ = ("_early", "_factory", "_handler", "_outbox", "_ready", "_start", "_unsent")

    def __init__(self, manager: web.Server, *, loop: asyncio.AbstractEventLoop, start: Start,
                 ready: Ready, outbox: Outbox, **kwargs: Any) -> None:
        super().__init__(manager, loop=loop, **kwargs)
        self._start = start
        self._ready = ready
        self._outbox = outbox
        self._unsent: list[bytes] = []  # answers the outbox holds, in order
        self._early: deque[_Early] = deque()
        # start() asks these two for every message it runs; an early one is already built.
        factory, handler = self._request_factory, self._request_handler
        assert factory is not None
        assert handler is not None
        self._factory: Callable[..., web.BaseRequest] = factory
        self._handler: Callable[[web.BaseRequest], Any] = handler
        self._request_factory = self._make_request  # type: ignore[assignment]
        self._request_handler = self._handle

    def data_received(self, data: bytes) -> None:
        waiter = self._waiter
        transport = self.transport
        if (waiter is None or waiter.done() or self._messages or self._payload_parser is not None
                or self._upgraded or self._force_close or self._close or self._logging_enabled
                or transport is None):
            super().data_received(data)
            return
        parser = self._parser
        assert parser is not None
        messages: Any
        try:
            messages, upgraded, tail = parser.feed_data(data)
        except HttpProcessingError as exc:  # as RequestHandler.data_received answers it
            messages = [(_ErrInfo(status=400, exc=exc, message=exc.message), EMPTY_PAYLOAD)]
            upgraded, tail = False, b""
        queued = False
        for message, payload in messages:
            self._request_count += 1
            if (not queued and payload is EMPTY_PAYLOAD and not isinstance(message, _ErrInfo)
                    and not message.should_close and not message.upgrade
                    and not transport.get_write_buffer_size() and not transport.is_closing()
                    and self._ready(message.method, message.path)
                    and self._answer(message, payload)):
                continue
            self._messages.append((message, payload))
            queued = True
        self._upgraded = upgraded
        if upgraded and tail:
            self._message_tail = tail
        if queued:
            if not waiter.done():
                waiter.set_result(None)
            if not self._buffer_paused and len(self._messages) >= self._max_msg_queue_size:
                self._pause_reading_for_buffer()

    def _answer(self, message: Any, payload: StreamReader) -> bool:
        """Run the steps of `message`; True when it was answered (written) at once, else it
        is queued as an early message for `start()` (False: queue it, in order)."""
        loop = self._loop
        transport = self.transport
        assert transport is not None  # data_received checked it
        request = self._factory(message, payload, self, StreamWriter(self, loop),
                                self._task_handler)
        context = contextvars.copy_context()
        try:
            started = context.run(self._start, request)
        except Exception as exc:  # noqa: BLE001 - the pipeline catches its own; aiohttp's 500
            started = _Raise(exc)
        if isinstance(started, BytesResponse):
            message = started.render(request)
            if self._unsent or self._outbox.hold(self):
                self._unsent.append(message)
            else:  # the batch's first answer
                transport.write(message)
            parser = self._parser
            if parser is not None:
                parser.message_consumed()
            manager = self._manager
            if manager is not None:
                manager.requests_count += 1
            # What start() does after a keep-alive answer: the idle timer starts again.
            self._keepalive = True
            close_time = loop.time() + self._keepalive_timeout
            self._next_keepalive_close_time = close_time
            if self._keepalive_handle is None:
                self._keepalive_handle = loop.call_at(close_time, self._process_keepalive)
            return True
        self._early.append(_Early(message, request, started, context))
        return False

    def _make_request(self, message: Any, payload: StreamReader, protocol: RequestHandler,
                      writer: StreamWriter, task: asyncio.Task[None]) -> web.BaseRequest:
        early = self._early
        if early and early[0].message is message:
            return early[0].request
        return self._factory(message, payload, protocol, writer, task)

    def _handle(self, request: web.BaseRequest) -> Coroutine[Any, Any, web.StreamResponse]:
        if self._unsent:  # start() runs a message: the answers before it go first
            self.flush()
        early = self._early
        if early and early[0].request is request:
            return _finish(early.popleft())
        return self._handler(request)  # type: ignore[no-any-return]

    def flush(self) -> None:
        """Write the answers held for this connection (the outbox calls it after the reads)."""
        unsent = self._unsent
        if not unsent:
            return
        self._unsent = []
        transport = self.transport
        if transport is None or transport.is_closing():
            return  # closed under them by another way than this handler's: lost with it
        transport.write(unsent[0] if len(unsent) == 1 else b"".join(unsent))

    def close(self) -> None:
        self.flush()
        super().close()

    def force_close(self) -> None:
        self.flush()
        super().force_close()

    def eof_received(self) -> None:
        # The transport closes once this returns: the answers to what was read go out first.
        self.flush()
        super().eof_received()

    def connection_lost(self, exc: BaseException | None) -> None:
        self._unsent = []  # nobody left to read them
        early = list(self._early)
        self._early.clear()
        super().connection_lost(exc)
        for entry in early:  # start() will not run them: close what their steps started
            if not isinstance(entry.started, web.StreamResponse):
                entry.context.run(entry.started.close)


class _Raise:
    """An `Unfinished` that raises what the steps raised, for aiohttp's handler to answer."""

    def __init__(self, exc: Exception) -> None:
        self._exc = exc

    async def _raise(self) -> web.StreamResponse:
        raise self._exc

    def run(self) -> Coroutine[Any, Any, web.StreamResponse]:
        return self._raise()

    def close(self) -> None:
        """Nothing was started."""


async def _finish(entry: _Early) -> web.StreamResponse:
    """An early message's answer, as `start()` awaits its handler's."""
    started = entry.started
    if isinstance(started, web.StreamResponse):
        return started
    return await _InContext(started.run(), entry.context)


class _InContext:
    """Awaits `coro` in the current task (start()'s handler task), each of its steps run in
    `context`: the steps set context variables and reset them by token, which works only in
    the context that set them. A task of that context would do too, at the cost of a second
    task per request on the way that already awaits (a cold herd's ten thousand waiters)."""

    __slots__ = ("_context", "_coro")

    def __init__(self, coro: Coroutine[Any, Any, web.StreamResponse],
                 context: contextvars.Context) -> None:
        self._coro = coro
        self._context = context

    def __await__(self) -> Generator[Any, Any, web.StreamResponse]:
        run, coro = self._context.run, self._coro
        try:
            pending = run(coro.send, None)
        except StopIteration as done:
            return cast(web.StreamResponse, done.value)
        while True:
            try:
                value = yield pending  # the future the steps wait on, to the enclosing task
            except BaseException as exc:  # noqa: BLE001 - cancellation included: to the steps
                try:
                    pending = run(coro.throw, exc)
                except StopIteration as done:
                    return cast(web.StreamResponse, done.value)
            else:
                try:
                    pending = run(coro.send, value)
                except StopIteration as done:
                    return cast(web.StreamResponse, done.value)


class Outbox:
    """The connections with answers held, written together once the loop has run its batch of
    socket reads: one `call_soon` per batch (why: the module docstring). A batch's first
    answer is written at once: it wakes the client as soon as it can, and alone (one caller)
    it has nothing to wait for."""

    __slots__ = ("_held", "_loop", "_open")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._held: list[AnsweringRequestHandler] = []
        self._open = False  # a batch's first answer was written; its end is scheduled

    def hold(self, handler: AnsweringRequestHandler) -> bool:
        """Whether `handler`'s answer waits for the end of this batch (the outbox then writes
        it and those after it); False for the batch's first answer, to write at once."""
        if not self._open:
            self._open = True
            self._loop.call_soon(self.flush)
            return False
        self._held.append(handler)
        return True

    def flush(self) -> None:
        held, self._held = self._held, []
        self._open = False
        for handler in held:
            handler.flush()


class AnsweringServer(web.Server):
    """aiohttp's low-level server with `AnsweringRequestHandler` connections, sharing one
    outbox."""

    def __init__(self, handler: Any, *, start: Start, ready: Ready, **kwargs: Any) -> None:
        super().__init__(handler, **kwargs)
        self._start = start
        self._ready = ready
        self._outbox = Outbox(self._loop)

    def __call__(self) -> RequestHandler:
        return AnsweringRequestHandler(self, loop=self._loop, start=self._start,
                                       ready=self._ready, outbox=self._outbox, **self._kwargs)
