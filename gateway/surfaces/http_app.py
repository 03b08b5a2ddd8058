"""The HTTP surface assembled: every route module behind the one pipeline, hosted two ways.

This module only composes: the route modules (http_native, http_lakekeeper, http_iceberg,
http_aws, http_ops) know nothing of it, and the pipeline (http_pipeline.py) knows nothing of the
route modules.
"""

from __future__ import annotations

import asyncio
from typing import Any

from aiohttp import web

from gateway.surfaces import http_protocol
from gateway.surfaces.http_aws import AwsApi
from gateway.surfaces.http_iceberg import IcebergApi
from gateway.surfaces.http_lakekeeper import LakekeeperApi
from gateway.surfaces.http_native import NativeApi
from gateway.surfaces.http_ops import OpsApi
from gateway.surfaces.http_pipeline import HttpDeps as HttpDeps
from gateway.surfaces.http_pipeline import HttpPipeline
from gateway.surfaces.http_routing import Match, SegmentRouter
from gateway.surfaces.http_signer import SignerApi
from gateway.surfaces.memo import BoundedLru
from gateway.tuning import MATCH_CACHE_MAX_TARGET as MATCH_CACHE_MAX_TARGET

DEPS_KEY: web.AppKey[HttpDeps] = web.AppKey("lakegate_deps", HttpDeps)
MATCHES_KEY: web.AppKey[BoundedLru[tuple[str, str], Match]] = web.AppKey(
    "lakegate_matches", BoundedLru
)
ROUTER_KEY: web.AppKey[SegmentRouter] = web.AppKey("lakegate_router", SegmentRouter)


def build_router(deps: HttpDeps, *, ops_only: bool = False) -> SegmentRouter:
    """All HTTP routes of the daemon, with the 404 fences of the Lakekeeper mounts.

    `ops_only`: just /livez, /readyz and /metrics (the ops listener, which never serves
    credentials).
    """
    router = SegmentRouter()
    if ops_only:
        router.add(OpsApi(deps).routes())
        return router
    for api in (OpsApi(deps), NativeApi(deps), AwsApi(deps), LakekeeperApi(deps),
                IcebergApi(deps), SignerApi(deps)):
        router.add(api.routes())
    for mount in ("lakekeeper", "catalog", "management"):
        router.fence((mount,), "RouteNotAllowed", lakekeeper=True)
    return router


def build_pipeline(deps: HttpDeps, *, ops_only: bool = False) -> HttpPipeline:
    """The pipeline over every route of the daemon (or only the ops routes)."""
    return HttpPipeline(build_router(deps, ops_only=ops_only), deps)


def build_http_app(deps: HttpDeps) -> web.Application:
    """The aiohttp application serving every HTTP surface (tests and embedding).

    Args:
        deps: the shared dependencies (service operations, gate, metrics, ...).
    """
    pipeline = build_pipeline(deps)
    # +1 KiB: our own check in read_json answers 413 with the envelope before aiohttp's limit.
    app = web.Application(client_max_size=deps.max_body_bytes + 1024)
    app[DEPS_KEY] = deps
    app[MATCHES_KEY] = pipeline.matches
    app[ROUTER_KEY] = pipeline.router
    app.router.add_route("*", "/{tail:.*}", pipeline.dispatch)
    return app


def build_http_server(
    deps: HttpDeps, *, ops_only: bool = False, **protocol_kwargs: Any
) -> web.Server:
    """The daemon's HTTP server: the same pipeline directly under aiohttp's low-level server.

    The pipeline routes by itself (SegmentRouter over raw segments), so aiohttp's URL
    dispatcher, match info and middleware layer only added per-request work (a path walk, a
    regex and an unquote of the whole path per request: about a sixth of a cached credential
    answer). Requests are BaseRequests with the same body limit `build_http_app` sets.
    Must be called with the event loop running; `protocol_kwargs` go to aiohttp's
    RequestHandler (e.g. keepalive_timeout), as AppRunner's keyword arguments would.
    A request whose steps need no await (a confirmed cache hit) is answered in the
    connection's read callback (http_protocol.py) when the installed aiohttp allows it.
    """
    pipeline = build_pipeline(deps, ops_only=ops_only)
    loop = asyncio.get_running_loop()
    max_size = deps.max_body_bytes + 1024

    def make_request(message: Any, payload: Any, protocol: Any, writer: Any,
                     task: asyncio.Task[None]) -> web.BaseRequest:
        return web.BaseRequest(message, payload, protocol, writer, task, loop,
                               client_max_size=max_size)

    # access_log=None: aiohttp's access log would print raw paths; our own logging covers it.
    kwargs = {"access_log": None, **protocol_kwargs}
    if http_protocol.supported():
        # Requests that need no await are answered as they arrive (http_protocol.py).
        return http_protocol.AnsweringServer(pipeline.serve, start=pipeline.start,
                                             ready=pipeline.ready,
                                             request_factory=make_request, **kwargs)
    return web.Server(pipeline.serve, request_factory=make_request, **kwargs)
