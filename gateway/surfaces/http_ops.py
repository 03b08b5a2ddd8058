"""Operations routes: /metrics (Prometheus text), /livez, /readyz.

/readyz means "can serve": a token obtained (or not needed) and the catalog
reachable, or still inside the stale budget; the service decides, this only renders it.
These are open routes: not admitted, and not counted in lakegate_requests_total (kind is
credential|metadata|admin).
"""

from __future__ import annotations

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from gateway.surfaces.http_pipeline import HttpDeps
from gateway.surfaces.http_routing import OpenRoute
from gateway.surfaces.render import json_response


class OpsApi:
    """Liveness, readiness and metrics."""

    def __init__(self, deps: HttpDeps) -> None:
        self._deps = deps

    def routes(self) -> list[OpenRoute]:
        return [
            OpenRoute("GET", ("metrics",), self.metrics),
            OpenRoute("GET", ("livez",), self.livez),
            OpenRoute("GET", ("readyz",), self.readyz),
        ]

    async def metrics(self, request: web.BaseRequest) -> web.StreamResponse:
        body = generate_latest(self._deps.metrics.registry)
        response = web.Response(body=body)
        response.headers["Content-Type"] = CONTENT_TYPE_LATEST
        return response

    async def livez(self, request: web.BaseRequest) -> web.StreamResponse:
        return json_response({"status": "ok"})

    async def readyz(self, request: web.BaseRequest) -> web.StreamResponse:
        ready, reason = await self._deps.ops.readiness()
        return json_response(
            {"status": "ready" if ready else "not ready", "reason": reason},
            status=200 if ready else 503,
        )
