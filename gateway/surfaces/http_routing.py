"""Routes, route matches and a small segment router over RAW path segments.

aiohttp matches routes on the decoded path, where `%2F` inside a table name would already have
become a separator; Lakekeeper's clients percent-encode names fully, so the HTTP surfaces match on
the raw segments and decode each captured segment themselves (http_codec.decode_segment).

A `Route` declares what the pipeline (http_pipeline.py) needs to run it: its surface and its
metrics kind. An `OpenRoute` (/livez, /readyz, /metrics) is neither admitted nor counted.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Union

from aiohttp import web

from gateway.errors import GatewayError, NotFoundError
from gateway.models import AccessMode, CallerIdentity, RequestContext, TableRef
from gateway.surfaces.accounting import Kind, Surface, Tally
from gateway.surfaces.bytes_response import BytesResponse
from gateway.surfaces.render import RenderedBody


@dataclass(slots=True, eq=False, repr=False)
class HttpCall:
    """What an admitted route's handler receives (the HTTP twin of `GrpcCall`).

    Built by the pipeline once the caller is admitted: the request (BaseRequest's API only:
    the daemon's low-level server builds BaseRequests), the cached route match with its memo,
    the caller, the RequestContext passed down and the request's Tally. Slotted and not frozen:
    built once per request, so as cheap as a hand-written class.
    """

    request: web.BaseRequest
    match: Match
    request_id: str
    caller: CallerIdentity
    ctx: RequestContext
    tally: Tally

    @property
    def params(self) -> dict[str, str]:
        """The captured raw (still percent-encoded) segments."""
        return self.match.params


# A handler's answer, or (a BytesResponse) the answer itself when it needs no await: the hot
# credential routes answer a confirmed cache hit without building a coroutine.
CallHandler = Callable[
    [HttpCall], Awaitable[web.StreamResponse | BytesResponse] | BytesResponse]
OpenHandler = Callable[[web.BaseRequest], Awaitable[web.StreamResponse]]
# The `kind` of a route whose kind depends on the request (Lakekeeper's load: vended or not).
KindOf = Callable[[web.BaseRequest], Kind]


@dataclass(frozen=True)
class Route:
    """An admitted, counted route: `pattern` segments are literals or `{name}` captures.

    Routes of surface `rest` (the Lakekeeper-compatible mounts) also get Lakekeeper's cache
    headers on every answer.
    """

    method: str
    pattern: tuple[str, ...]
    handler: CallHandler
    surface: Surface
    kind: Kind | KindOf
    lakekeeper: bool = field(init=False)
    # The pattern as the audit's `route` names it ("/".join(pattern)), joined once.
    path: str = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "lakekeeper", self.surface == "rest")
        object.__setattr__(self, "path", "/".join(self.pattern))


@dataclass(frozen=True)
class OpenRoute:
    """A route outside the pipeline: no admission, not counted in lakegate_requests_total."""

    method: str
    pattern: tuple[str, ...]
    handler: OpenHandler
    lakekeeper: bool = False


AnyRoute = Union[Route, OpenRoute]  # noqa: UP007 - a runtime alias, kept readable


class MethodNotAllowedError(GatewayError):
    http_status = 405
    error_type = "MethodNotAllowed"


class Match:
    """A route matched for one exact (method, raw target); cached and shared by the requests
    that repeat that target, so it also carries the target's memo.

    The memo (typed slots, filled by the route's handler):
    - `ref`, `access`: the parse of the target (a pure function of it, so stored only once it
      succeeded);
    - `body`: the last pre-rendered response body, which the handler reuses only while
      `RenderedBody.fits` the lookup it serves;
    - `expects`: whether the query names an expected table identity (the native credential
      route's `expected_location` / `table_id`), None until the handler first asked;
    - `at_once`: whether the last request for the target was answered without an await (the
      pipeline sets it): the next one is then tried in the connection's read callback
      (http_protocol.py); one that awaited (a miss, a refresh) sends the next the usual way.
    """

    __slots__ = ("access", "at_once", "body", "expects", "params", "ref", "route")

    def __init__(self, route: AnyRoute, params: dict[str, str] | None = None) -> None:
        self.route = route
        self.params: dict[str, str] = params if params is not None else {}
        self.ref: TableRef | None = None
        self.access: AccessMode | None = None
        self.body: RenderedBody | None = None
        self.expects: bool | None = None
        self.at_once = False


@dataclass(frozen=True)
class Fence:
    """A path prefix whose unmatched requests get a specific 404 type (e.g. RouteNotAllowed)."""

    prefix: tuple[str, ...]
    error_type: str
    lakekeeper: bool


class SegmentRouter:
    """Routes by exact segment count and literals; captures are raw (still percent-encoded)."""

    def __init__(self) -> None:
        self._by_len: dict[int, list[AnyRoute]] = {}
        self._fences: list[Fence] = []

    def add(self, routes: Sequence[AnyRoute]) -> None:
        for route in routes:
            self._by_len.setdefault(len(route.pattern), []).append(route)

    def fence(self, prefix: tuple[str, ...], error_type: str, *, lakekeeper: bool) -> None:
        self._fences.append(Fence(prefix, error_type, lakekeeper))

    def routes(self) -> list[AnyRoute]:
        """Every registered route (for the OpenAPI check and the hostile-input walk)."""
        return [r for routes in self._by_len.values() for r in routes]

    def match(self, method: str, segments: list[str]) -> Match:
        """The route for (method, segments).

        Raises:
            NotFoundError: no route (type from the fence covering the path, else NotFound).
            MethodNotAllowedError: the path exists with other methods.
        """
        path_matched = False
        for route in self._by_len.get(len(segments), ()):
            params = _capture(route.pattern, segments)
            if params is None:
                continue
            path_matched = True
            if route.method == method or (route.method == "GET" and method == "HEAD"):
                return Match(route, params)
        if path_matched:
            raise MethodNotAllowedError(f"method {method} not allowed here")
        raise NotFoundError("no such route", lakekeeper_type=self.fence_for(segments)[0])

    def fence_for(self, segments: list[str]) -> tuple[str, bool]:
        """(404 error type, whether Lakekeeper headers apply) for an unmatched path."""
        for f in self._fences:
            if tuple(segments[: len(f.prefix)]) == f.prefix:
                return f.error_type, f.lakekeeper
        return "NotFound", False


def _capture(pattern: tuple[str, ...], segments: list[str]) -> dict[str, str] | None:
    params: dict[str, str] = {}
    for pat, seg in zip(pattern, segments, strict=True):
        if pat.startswith("{"):
            params[pat[1:-1]] = seg
        elif pat != seg:
            return None
    return params
