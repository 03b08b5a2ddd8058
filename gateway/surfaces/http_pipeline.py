"""The one HTTP pipeline: request id, routing, track → admit → context, then the route's handler.

Every admitted route runs the same steps, in this order, exactly once (the gRPC surface's
`guarded()` does the same for its methods):

1. a request id (the caller's well-formed `x-request-id`, else a new UUID-shaped one), set in the
   logging context var and echoed back;
2. the route match, kept per exact (method, raw target) in a small bounded LRU: executors repeat
   the same few URLs, and the match (with its memo of the parsed target and the pre-rendered
   body) is a pure function of them;
3. `recorder.track(surface, kind)`: the request is counted once, whatever happens next;
4. `gate.admit`: anti-SSRF headers, caller authentication, rate limit;
5. the RequestContext, then the handler with an `HttpCall` (parse, authorize, operate, render).

Errors are rendered in one place: a GatewayError through its status and the Lakekeeper envelope,
anything unexpected as a 500 envelope with an Error ID and no internals (logged with the
traceback, redacted).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Coroutine, Generator, Hashable
from dataclasses import dataclass, field
from typing import Any, cast

from aiohttp import hdrs, web
from aiohttp.http import HttpVersion11

from gateway.audit import TableNotes
from gateway.clock import Clock
from gateway.errors import GatewayError
from gateway.logging import request_id_var
from gateway.metrics import Metrics
from gateway.models import AccessMode, CallerIdentity, ListResult, LoadResult, TableRef
from gateway.service.signing import SigningService
from gateway.surfaces.accounting import Recorder
from gateway.surfaces.bytes_response import BytesResponse, HttpDate, header_value_ok
from gateway.surfaces.http_codec import (
    call_ref,
    context_of,
    create_spec,
    namespace_of,
    params_scope,
    parse_bool,
    read_json,
    rename_pair,
    request_id_of,
    split_target,
    warehouse_of,
)
from gateway.surfaces.http_routing import HttpCall, Match, OpenRoute, SegmentRouter
from gateway.surfaces.ingress import Gate
from gateway.surfaces.lakekeeper_compat import carries_keys, lakekeeper_error
from gateway.surfaces.memo import BoundedLru
from gateway.surfaces.operations import Operations
from gateway.surfaces.peers import LazyPeer
from gateway.surfaces.render import (
    NO_STORE,
    error_response,
    internal_error_response,
    json_response,
)
from gateway.surfaces.request_ids import RequestIds
from gateway.tuning import FAILED_LOG_INTERVAL_S, MATCH_CACHE_MAX_TARGET, MATCH_CACHE_SIZE

_log = logging.getLogger("lakegate.http")

# A request's answer: a prebuilt BytesResponse (the hot path) or any aiohttp response.
Answer = web.StreamResponse | BytesResponse
# The pipeline's steps (HttpPipeline._steps): they yield what they need awaited.
Steps = Generator[Awaitable[Any], Any, Answer]

# Lakekeeper sets these on every /catalog, /management, /lakekeeper answer (router.rs).
LAKEKEEPER_HEADERS = {
    "Cache-Control": "private",
    "Vary": "authorization, x-project-id, x-iceberg-access-delegation",
}
LAKEKEEPER_PAIRS = tuple(LAKEKEEPER_HEADERS.items())
# A prebuilt answer with its own Cache-Control (`no-store`: it carries keys) gets only `Vary`.
LAKEKEEPER_VARY = tuple((k, v) for k, v in LAKEKEEPER_PAIRS if k != "Cache-Control")
# Tuning (gateway/tuning.py): a failing route logs at most once per FAILED_LOG_INTERVAL_S;
# route matches are remembered (MATCH_CACHE_SIZE) only for targets up to MATCH_CACHE_MAX_TARGET.


@dataclass(frozen=True)
class HttpDeps:
    """What the HTTP route modules need; built once by the App."""

    ops: Operations
    gate: Gate
    recorder: Recorder
    metrics: Metrics
    clock: Clock
    max_body_bytes: int
    # Lakekeeper clamps a page size to its maximum; the service refuses one above it: both are
    # `upstream.max_page_size`, the one page-size bound of every surface.
    max_page_size: int = 1000
    # The Date line of prebuilt answers, formatted once per second for every route.
    date: HttpDate = field(default_factory=HttpDate)
    # The node's S3 signer (surfaces/http_signer.py); None: the sign route is not mounted.
    signing: SigningService | None = None


class LogLimiter:
    """At most one log line per key per `interval_s` (keys: a route and a status, so few).

    `allow` answers None to drop the line, or how many lines of that key were dropped since the
    last one written (so the count is never lost, only folded into the next line).
    """

    MAX_KEYS = 1024  # a safety bound: keys come from the route table, not from callers

    def __init__(self, clock: Clock, interval_s: float) -> None:
        self._clock = clock
        self._interval_s = interval_s
        self._seen: dict[Hashable, tuple[float, int]] = {}  # key -> (last written, dropped)

    def allow(self, key: Hashable) -> int | None:
        now = self._clock.monotonic()
        last = self._seen.get(key)
        if last is not None and now - last[0] < self._interval_s:
            self._seen[key] = (last[0], last[1] + 1)
            return None
        if len(self._seen) >= self.MAX_KEYS and key not in self._seen:
            self._seen.clear()
        self._seen[key] = (now, 0)
        return last[1] if last is not None else 0


class HttpPipeline:
    """The one request handler of every HTTP route (see the module docstring).

    Both hostings run it: `build_http_app` behind aiohttp's URL dispatcher (tests and
    embedding), `build_http_server` directly under aiohttp's low-level server (the daemon).
    """

    def __init__(self, router: SegmentRouter, deps: HttpDeps) -> None:
        self.router = router
        self.ids = RequestIds()
        self.matches: BoundedLru[tuple[str, str], Match] = BoundedLru(MATCH_CACHE_SIZE)
        self._gate = deps.gate
        self._recorder = deps.recorder
        self._failed_log = LogLimiter(deps.clock, FAILED_LOG_INTERVAL_S)

    def _match(self, request: web.BaseRequest, raw_target: str) -> Match:
        key = (request.method, raw_target)
        match = self.matches.get(key)
        if match is None:
            match = self.router.match(request.method, split_target(raw_target)[0])
            if len(raw_target) <= MATCH_CACHE_MAX_TARGET:
                self.matches.put(key, match)
        return match

    async def dispatch(self, request: web.BaseRequest, *,
                       expect: bool = False) -> web.StreamResponse:
        """The response to `request`; with `expect`, first what aiohttp's URL dispatcher does
        for an `Expect` header (the low-level server has no dispatcher: `serve`)."""
        started = self._begin(request, expect)
        if isinstance(started, Unfinished):
            return await started.run()
        return cast(web.StreamResponse, started)

    def start(self, request: web.BaseRequest) -> Answer | Unfinished:
        """`serve` as far as it goes without awaiting: the answer itself when it needed no
        await (a confirmed cache hit), else the rest of the request (`Unfinished`). The
        caller runs this and that rest in one context (the steps set context variables and
        reset them at the end): `http_protocol` copies one per request."""
        return self._begin(request, True)

    def _begin(self, request: web.BaseRequest, expect: bool) -> Answer | Unfinished:
        """The steps up to their first await: the answer, or what is left of them."""
        steps = self._steps(request, expect)
        try:
            pending = steps.send(None)
        except StopIteration as done:
            return cast(Answer, done.value)
        return Unfinished(steps, pending)

    def ready(self, method: str, raw_target: str) -> bool:
        """Whether the last request for this exact target was answered without an await, so
        that this one is worth trying at once (`start` in the connection's read callback). A
        target that awaited last (a cold herd's misses, a refresh) goes the usual way: its
        steps would only begin in the callback and continue in a task, more work per request
        for no gain."""
        match = self.matches.get((method, raw_target))
        return match is not None and match.at_once

    def _steps(self, request: web.BaseRequest, expect: bool) -> Steps:
        """The pipeline's steps as a generator: it yields each awaitable it needs awaited and
        is sent its result (or thrown its exception) where it would have awaited it, so the
        steps are the same, in the same order, whether they finish at once (`start`) or in a
        task (`dispatch`, `drive`)."""
        if expect and hdrs.EXPECT in request.headers:
            yield expect_continue(request)
        request_id = request_id_of(request, self.ids)
        token = request_id_var.set(request_id)
        lakekeeper = False
        pattern: tuple[str, ...] = ()
        route_path = ""
        notes: TableNotes | None = None
        try:
            raw_target = request.raw_path
            try:
                match = self._match(request, raw_target)
                route = match.route
                lakekeeper, pattern = route.lakekeeper, route.pattern
                response: web.StreamResponse | BytesResponse
                if isinstance(route, OpenRoute):
                    match.at_once = False
                    response = yield route.handler(request)
                else:
                    # Inline, not a helper coroutine: one frame less on the hot path.
                    kind = route.kind if isinstance(route.kind, str) else route.kind(request)
                    route_path = route.path
                    # audit.TableNotes (a credential grant: the service's line says it)
                    notes = TableNotes(kind != "credential")  # successes: not for grants
                    headers = request.headers
                    with self._recorder.track(route.surface, kind) as tally:
                        peer = LazyPeer(request.transport)
                        uds = peer.on_unix_socket
                        authorization = headers.get(hdrs.AUTHORIZATION)
                        now = self._gate.admit_now(authorization, headers, peer=peer, uds=uds)
                        awaited = now is None
                        caller: CallerIdentity = (
                            now if now is not None
                            else (yield self._gate.admit(authorization, headers, peer=peer,
                                                         uds=uds)))
                        ctx = context_of(request, request_id, caller, route.surface,
                                         peer.caller_key)
                        if ctx.project_id is not None:
                            ctx = self._gate.check_project(
                                caller, ctx, lambda: params_scope(match.params))
                        answer = route.handler(
                            HttpCall(request, match, request_id, caller, ctx, tally))
                        # A prebuilt answer needs no await (http_routing.CallHandler).
                        if isinstance(answer, BytesResponse):
                            response = answer
                            match.at_once = not awaited
                        else:
                            match.at_once = False
                            response = yield answer
            except GatewayError as err:
                if not lakekeeper:
                    lakekeeper = self.router.fence_for(split_target(raw_target)[0])[1]
                if lakekeeper:
                    err = lakekeeper_error(err, pattern, request.headers.get("Authorization"))
                response = error_response(err, request_id)
            except web.HTTPException:
                raise
            except Exception:  # noqa: BLE001 - the surface boundary
                # The surface boundary: one of the two places a broad catch is allowed.
                _log.exception("unhandled error", extra={"path": request.path})
                response = internal_error_response(request_id)
            if notes is not None:
                status = response.status
                # A success of a route that writes no success line only closes (finally).
                if status >= 400 or notes.successes:
                    notes.write(request.method, route_path, str(status), failed=status >= 400)
            if isinstance(response, BytesResponse):
                # The hot path's prebuilt answer: a 200, its headers written with the body.
                if lakekeeper or _log.isEnabledFor(logging.DEBUG):
                    return self._finish_bytes(request, response, request_id, lakekeeper)
                response.request_id = request_id
                # aiohttp's request handler only calls prepare() and write_eof() and reads
                # keep_alive.
                return cast(web.StreamResponse, response)
            response.headers["x-request-id"] = request_id
            if response.status >= 500:
                left_out = self._failed_log.allow((request.method, pattern, response.status))
                if left_out is not None:
                    _log.warning("request failed", extra={"method": request.method,
                                                          "path": request.path,
                                                          "status": response.status,
                                                          "left_out": left_out})
            elif _log.isEnabledFor(logging.DEBUG):
                _log.debug("request", extra={"method": request.method, "path": request.path,
                                             "status": response.status})
            if lakekeeper:
                body = response.body if isinstance(response, web.Response) else None
                if isinstance(body, bytes) and carries_keys(body):
                    response.headers["Cache-Control"] = NO_STORE
                for name, value in LAKEKEEPER_HEADERS.items():
                    response.headers.setdefault(name, value)
                # Lakekeeper (tower-http) echoes any caller id; a malformed one is echoed
                # but not used in logs or upstream calls.
                response.headers["x-request-id"] = request.headers.get("x-request-id", request_id)
            return response
        finally:
            if notes is not None:
                notes.close()
            request_id_var.reset(token)

    def _finish_bytes(self, request: web.BaseRequest, response: BytesResponse, request_id: str,
                      lakekeeper: bool) -> web.StreamResponse:
        """The request id (and Lakekeeper's headers) on a prebuilt answer; a caller's echoed
        id that may not be written as is turns it into a regular `web.Response`."""
        if _log.isEnabledFor(logging.DEBUG):
            _log.debug("request", extra={"method": request.method, "path": request.path,
                                         "status": response.status})
        response.request_id = request_id
        if lakekeeper:
            echoed = request.headers.get("x-request-id", request_id)
            response.extra = LAKEKEEPER_PAIRS if response.cache_control is None else LAKEKEEPER_VARY
            response.request_id = echoed
            if not header_value_ok(echoed):
                return response.to_response()
        # aiohttp's request handler only calls prepare() and write_eof() and reads keep_alive.
        return cast(web.StreamResponse, response)

    def serve(self, request: web.BaseRequest) -> Coroutine[Any, Any, web.StreamResponse]:
        """`dispatch` plus what aiohttp's URL dispatcher would do first: `Expect` handling
        (dispatch's own coroutine: no extra frame per request)."""
        return self.dispatch(request, expect=True)


class Unfinished:
    """The rest of a request's steps, from the first awaitable they yielded (`start`)."""

    __slots__ = ("pending", "steps")

    def __init__(self, steps: Steps, pending: Awaitable[Any]) -> None:
        self.steps = steps
        self.pending = pending

    def run(self) -> Coroutine[Any, Any, web.StreamResponse]:
        """The rest, to await in the context the steps began in (run once)."""
        return drive(self.steps, self.pending)

    def close(self) -> None:
        """Abandon the rest (its connection is gone): the awaitable the steps yielded is
        closed unawaited and the steps finish their `finally` (to call in their context)."""
        pending = self.pending
        if isinstance(pending, Coroutine):
            pending.close()
        self.steps.close()


async def drive(steps: Steps, pending: Awaitable[Any]) -> web.StreamResponse:
    """Run the pipeline's steps from `pending`, the first awaitable they yielded, to their
    answer: each awaitable is awaited here (in a task, so timeouts and cancellation work as
    in any coroutine) and its result sent back, or its exception thrown in."""
    while True:
        try:
            value = await pending
        except BaseException as exc:  # noqa: BLE001 - thrown into the steps, which decide
            try:
                pending = steps.throw(exc)
            except StopIteration as done:
                return cast(web.StreamResponse, done.value)
        else:
            try:
                pending = steps.send(value)
            except StopIteration as done:
                return cast(web.StreamResponse, done.value)


async def expect_continue(request: web.BaseRequest) -> None:
    """aiohttp's default `Expect` handling (web_urldispatcher._default_expect_handler).

    Raises:
        web.HTTPExpectationFailed: an HTTP/1.1 Expect other than 100-continue (417).
    """
    expect = request.headers.get(hdrs.EXPECT, "")
    if request.version == HttpVersion11:
        if expect.lower() == "100-continue":
            await request.writer.write(b"HTTP/1.1 100 Continue\r\n\r\n")
            request.writer.output_size = 0  # the main body has not started yet
        else:
            raise web.HTTPExpectationFailed(text=f"Unknown Expect: {expect}")


class HttpApi:
    """Base of the route modules: the authorize → operate steps every surface shares.

    A route module parses (its own paths, query names and JSON field names) and renders (its own
    JSON); the operations in between are the same on every surface, so they live here once.
    Where two surfaces differ only in spelling (create and drop), the handler lives here too
    and each surface names its fields below.
    """

    # The create body's location field, and whether unknown fields go through to the catalog.
    BASE_LOCATION_KEY = "base_location"
    PASS_EXTRA = False
    # The drop query's purge parameter.
    PURGE_KEY = "purge"

    def __init__(self, deps: HttpDeps) -> None:
        self._d = deps
        self._ops = deps.ops
        self._gate = deps.gate

    def parse_bool(self, value: str | None, what: str, default: bool | None) -> bool | None:
        """This surface's boolean query values."""
        return parse_bool(value, what, default)

    def render_load(self, result: LoadResult) -> dict[str, Any]:
        """This surface's JSON for a loaded (or created) table."""
        raise NotImplementedError

    def _authorize(self, call: HttpCall, ref: TableRef,
                   access: AccessMode) -> Coroutine[Any, Any, None]:
        """The caller policy for one table (the gate's coroutine itself: no extra frame).

        Raises:
            PermissionDeniedError: when awaited, if the caller may not use `access` on it.
        """
        return self._gate.authorize(call.caller, call.ctx, ref.scope, access)

    def _authorize_namespace(self, call: HttpCall, warehouse: str, namespace: tuple[str, ...],
                             access: AccessMode) -> Coroutine[Any, Any, None]:
        """The caller policy for a whole namespace (list, namespace creation)."""
        return self._gate.authorize(call.caller, call.ctx, (warehouse, namespace, None), access)

    async def _body(self, call: HttpCall) -> dict[str, Any]:
        """The request's JSON object body, under the size limit."""
        return await read_json(call.request, self._d.max_body_bytes)

    async def create(self, call: HttpCall) -> web.StreamResponse:
        """Create a table; its name passes the same rules as every load (TableRef)."""
        warehouse, namespace = warehouse_of(call.params), namespace_of(call.params)
        spec = create_spec(await self._body(call), base_location_key=self.BASE_LOCATION_KEY,
                           pass_extra=self.PASS_EXTRA)
        await self._authorize(call, TableRef(warehouse, namespace, spec.name), AccessMode.WRITE)
        result = await self._ops.create_table(warehouse, namespace, spec, call.ctx)
        return json_response(self.render_load(result))

    async def _list(self, call: HttpCall, warehouse: str, namespace: tuple[str, ...], *,
                    page_token: str | None, page_size: int | None) -> ListResult:
        await self._authorize_namespace(call, warehouse, namespace, AccessMode.READ)
        return await self._ops.list_tables(warehouse, namespace, call.ctx,
                                           page_token=page_token or None, page_size=page_size)

    async def drop(self, call: HttpCall) -> web.StreamResponse:
        """DELETE a table; each surface names its purge parameter and parses booleans its way."""
        ref = call_ref(call)
        query = call.request.query
        purge = self.parse_bool(query.get(self.PURGE_KEY), self.PURGE_KEY, None)
        force = bool(self.parse_bool(query.get("force"), "force", False))
        await self._authorize(call, ref, AccessMode.WRITE)
        await self._ops.drop_table(ref, call.ctx, purge=purge, force=force)
        return web.Response(status=204)

    async def rename(self, call: HttpCall) -> web.StreamResponse:
        """`POST .../rename` with `{"source": {namespace, name}, "destination": {...}}`: the
        same body on both surfaces, so one handler."""
        warehouse = warehouse_of(call.params)
        source, destination = rename_pair(await self._body(call))
        for ns, name in (source, destination):
            await self._authorize(call, TableRef(warehouse, ns, name), AccessMode.WRITE)
        await self._ops.rename_table(warehouse, source, destination, call.ctx)
        return web.Response(status=204)
