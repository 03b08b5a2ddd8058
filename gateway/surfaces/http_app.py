"""The aiohttp Application factory: one dispatcher, the route modules, error rendering.

Every request gets a request id (the caller's well-formed `x-request-id`, else a new UUID-shaped
id, see request_ids.py), set in the logging context var and echoed back. Route matches are kept
per exact (method, raw target) in a small bounded LRU: executors repeat the same few URLs, and
the match (with the handler's memoized parse of the target) is a pure function of them. Errors are rendered in one place: a GatewayError
through its status and the Lakekeeper envelope, anything unexpected as a 500 envelope with an
Error ID and no internals (logged with the traceback, redacted).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from aiohttp import web

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


def build_http_app(deps: HttpDeps) -> web.Application:
    """The aiohttp application serving every HTTP surface.

    Args:
        deps: the shared dependencies (service operations, gate, metrics, ...).
    """
    router = build_router(deps)
    # +1 KiB: our own check in read_json answers 413 with the envelope before aiohttp's limit.
    app = web.Application(client_max_size=deps.max_body_bytes + 1024)
    app[DEPS_KEY] = deps
    ids = RequestIds()
    matches: BoundedLru[tuple[str, str], Match] = BoundedLru(MATCH_CACHE_SIZE)
    app[MATCHES_KEY] = matches

    async def dispatch(request: web.Request) -> web.StreamResponse:
        request_id = request_id_of(request, ids)
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
                response = await match.route.handler(request, Call(request_id, match))
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
                for key, value in LAKEKEEPER_HEADERS.items():
                    response.headers.setdefault(key, value)
            return response
        finally:
            request_id_var.reset(token)

    app.router.add_route("*", "/{tail:.*}", dispatch)
    return app
