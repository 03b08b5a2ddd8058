"""Operations routes: /metrics (Prometheus text), /livez, /readyz.

/readyz means "can serve" (anchors §3.10): a token obtained (or not needed) and the catalog
reachable, or still inside the stale budget; the service decides, this only renders it.
These routes are not counted in lakegate_requests_total (kind is credential|metadata|admin).
"""

from __future__ import annotations

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from gateway.surfaces.http_app import HttpDeps
from gateway.surfaces.http_codec import json_response
from gateway.surfaces.http_routing import Call, Route


class OpsApi:
    """Liveness, readiness and metrics."""

    def __init__(self, deps: HttpDeps) -> None:
        self._deps = deps

    def routes(self) -> list[Route]:
        return [
            Route("GET", ("metrics",), self.metrics),
            Route("GET", ("livez",), self.livez),
            Route("GET", ("readyz",), self.readyz),
        ]

    async def metrics(self, request: web.Request, call: Call) -> web.StreamResponse:
        body = generate_latest(self._deps.metrics.registry)
        response = web.Response(body=body)
        response.headers["Content-Type"] = CONTENT_TYPE_LATEST
        return response

    async def livez(self, request: web.Request, call: Call) -> web.StreamResponse:
        return json_response({"status": "ok"})

    async def readyz(self, request: web.Request, call: Call) -> web.StreamResponse:
        ready, reason = await self._deps.ops.readiness()
        return json_response(
            {"status": "ready" if ready else "not ready", "reason": reason},
            status=200 if ready else 503,
        )
