"""The aiohttp Application factory: one dispatcher, the route modules, error rendering.

Every request gets a request id (the caller's well-formed `x-request-id`, else a new UUID-shaped
id, see request_ids.py), set in the logging context var and echoed back. Route matches are kept
per exact (method, raw target) in a small bounded LRU: executors repeat the same few URLs, and
the match (with the handler's memoized parse of the target) is a pure function of them.
Errors are rendered in one place: a GatewayError through its status and the Lakekeeper envelope,
anything unexpected as a 500 envelope with an Error ID and no internals (logged with the
traceback, redacted).
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from typing import Any, cast

from aiohttp import hdrs, web
from aiohttp.http import HttpVersion11

from gateway.clock import Clock
from gateway.errors import GatewayError
from gateway.logging import request_id_var
from gateway.metrics import Metrics
from gateway.surfaces.accounting import Recorder
from gateway.surfaces.http_codec import (
    error_response,
    internal_error_response,
    request_id_of,
    split_target,
)
from gateway.surfaces.http_routing import Call, Match, SegmentRouter
from gateway.surfaces.ingress import Gate
from gateway.surfaces.memo import BoundedLru
from gateway.surfaces.operations import Operations
from gateway.surfaces.request_ids import RequestIds

_log = logging.getLogger("lakegate.http")

# Lakekeeper sets these on every /catalog, /management, /lakekeeper answer (router.rs).
LAKEKEEPER_HEADERS = {
    "Cache-Control": "private",
    "Vary": "authorization, x-project-id, x-iceberg-access-delegation",
}


@dataclass(frozen=True)
class HttpDeps:
    """What the HTTP route modules need; built once by the App."""

    ops: Operations
    gate: Gate
    recorder: Recorder
    metrics: Metrics
    clock: Clock
    max_body_bytes: int


DEPS_KEY: web.AppKey[HttpDeps] = web.AppKey("lakegate_deps", HttpDeps)
MATCHES_KEY: web.AppKey[BoundedLru[tuple[str, str], Match]] = web.AppKey(
    "lakegate_matches", BoundedLru
)

# Route matches remembered (bounded), and only for targets up to this length (aiohttp allows
# request lines up to 8 KiB; a flood of long distinct URLs must not pin 8 MiB).
MATCH_CACHE_SIZE = 1024
MATCH_CACHE_MAX_TARGET = 1024


def build_router(deps: HttpDeps) -> SegmentRouter:
    """All HTTP routes of the daemon, with the 404 fences of the Lakekeeper mounts."""
    # Local imports keep each route module independent of the factory (no import cycle).
    from gateway.surfaces.http_aws import AwsApi
    from gateway.surfaces.http_lakekeeper import LakekeeperApi
    from gateway.surfaces.http_native import NativeApi
    from gateway.surfaces.http_ops import OpsApi

    router = SegmentRouter()
    for api in (OpsApi(deps), NativeApi(deps), AwsApi(deps), LakekeeperApi(deps)):
        router.add(api.routes())
    for mount in ("lakekeeper", "catalog", "management"):
        router.fence((mount,), "RouteNotAllowed", lakekeeper=True)
    return router


class HttpHandler:
    """The one request handler of every HTTP surface: request id, routing, error rendering.

    Both hostings below run it: `build_http_app` behind aiohttp's URL dispatcher (tests and
    embedding), `build_http_server` directly under aiohttp's low-level server (the daemon).
    """

    def __init__(self, deps: HttpDeps) -> None:
        self.router = build_router(deps)
        self.ids = RequestIds()
        self.matches: BoundedLru[tuple[str, str], Match] = BoundedLru(MATCH_CACHE_SIZE)

    async def dispatch(self, request: web.BaseRequest) -> web.StreamResponse:
        router, matches = self.router, self.matches
        request_id = request_id_of(request, self.ids)
        token = request_id_var.set(request_id)
        lakekeeper = False
        try:
            raw_target = request.raw_path
            try:
                key = (request.method, raw_target)
                match = matches.get(key)
                if match is None:
                    match = router.match(request.method, split_target(raw_target)[0])
                    if len(raw_target) <= MATCH_CACHE_MAX_TARGET:
                        matches.put(key, match)
                lakekeeper = match.route.lakekeeper
                # Handlers use only BaseRequest's API (headers, raw_path, query, read, ...):
                # the daemon's low-level server builds BaseRequests, not web.Requests.
                response = await match.route.handler(cast(web.Request, request),
                                                     Call(request_id, match))
            except GatewayError as err:
                if not lakekeeper:
                    lakekeeper = router.fence_for(split_target(raw_target)[0])[1]
                response = error_response(err, request_id)
            except web.HTTPException:
                raise
            except Exception:  # noqa: BLE001 - the surface boundary
                # The surface boundary: one of the two places a broad catch is allowed.
                _log.exception("unhandled error", extra={"path": request.path})
                response = internal_error_response(request_id)
            response.headers["x-request-id"] = request_id
            if response.status >= 500:
                _log.warning("request failed", extra={"method": request.method,
                                                      "path": request.path,
                                                      "status": response.status})
            elif _log.isEnabledFor(logging.DEBUG):
                _log.debug("request", extra={"method": request.method, "path": request.path,
                                             "status": response.status})
            if lakekeeper:
                for name, value in LAKEKEEPER_HEADERS.items():
                    response.headers.setdefault(name, value)
            return response
        finally:
            request_id_var.reset(token)

    async def serve(self, request: web.BaseRequest) -> web.StreamResponse:
        """`dispatch` plus what aiohttp's URL dispatcher would do first: `Expect` handling."""
        if hdrs.EXPECT in request.headers:
            await expect_continue(request)
        return await self.dispatch(request)


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


def build_http_app(deps: HttpDeps) -> web.Application:
    """The aiohttp application serving every HTTP surface (tests and embedding).

    Args:
        deps: the shared dependencies (service operations, gate, metrics, ...).
    """
    handler = HttpHandler(deps)
    # +1 KiB: our own check in read_json answers 413 with the envelope before aiohttp's limit.
    app = web.Application(client_max_size=deps.max_body_bytes + 1024)
    app[DEPS_KEY] = deps
    app[MATCHES_KEY] = handler.matches
    app.router.add_route("*", "/{tail:.*}", handler.dispatch)
    return app


def build_http_server(deps: HttpDeps, **protocol_kwargs: Any) -> web.Server:
    """The daemon's HTTP server: the same handler directly under aiohttp's low-level server.

    The handler routes by itself (SegmentRouter over raw segments), so aiohttp's URL
    dispatcher, match info and middleware layer only added per-request work (a path walk, a
    regex and an unquote of the whole path per request: about a sixth of a cached credential
    answer). Requests are BaseRequests with the same body limit `build_http_app` sets.
    Must be called with the event loop running; `protocol_kwargs` go to aiohttp's
    RequestHandler (e.g. keepalive_timeout), as AppRunner's keyword arguments would.
    """
    handler = HttpHandler(deps)
    loop = asyncio.get_running_loop()
    max_size = deps.max_body_bytes + 1024

    def make_request(message: Any, payload: Any, protocol: Any, writer: Any,
                     task: asyncio.Task[None]) -> web.BaseRequest:
        return web.BaseRequest(message, payload, protocol, writer, task, loop,
                               client_max_size=max_size)

    # access_log=None: aiohttp's access log would print raw paths; our own logging covers it.
    return web.Server(handler.serve, request_factory=make_request,
                      **{"access_log": None, **protocol_kwargs})
