"""A small segment router over RAW path segments.

aiohttp matches routes on the decoded path, where `%2F` inside a table name would already have
become a separator; Lakekeeper's clients percent-encode names fully, so the HTTP surfaces match on
the raw segments and decode each captured segment themselves (http_codec.decode_segment).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

from aiohttp import web

from gateway.errors import GatewayError, NotFoundError


class Call:
    """What a handler receives besides the request: the request id and the route match.

    A plain slotted class (built once per request, so cheaper than a frozen dataclass).
    """

    __slots__ = ("match", "request_id")

    def __init__(self, request_id: str, match: Match) -> None:
        self.request_id = request_id
        self.match = match

    @property
    def params(self) -> dict[str, str]:
        """The captured raw (still percent-encoded) segments."""
        return self.match.params


Handler = Callable[[web.Request, Call], Awaitable[web.StreamResponse]]


@dataclass(frozen=True)
class Route:
    """`pattern` segments are literals or `{name}` captures; `lakekeeper` adds cache headers."""

    method: str
    pattern: tuple[str, ...]
    handler: Handler
    lakekeeper: bool = False


class MethodNotAllowedError(GatewayError):
    http_status = 405
    error_type = "MethodNotAllowed"


class Match:
    """A route matched for one exact (method, raw target); cached and shared by the requests
    that repeat that target.

    `parsed` and `rendered` are memo slots for the route's handler: the parse of the target
    (a pure function of it, so it is stored only once it succeeded) and the last rendered body
    (checked by the handler against the identity of what it renders before reuse).
    """

    __slots__ = ("params", "parsed", "rendered", "route")

    def __init__(self, route: Route, params: dict[str, str] | None = None) -> None:
        self.route = route
        self.params: dict[str, str] = params if params is not None else {}
        self.parsed: Any = None
        self.rendered: Any = None


@dataclass(frozen=True)
class Fence:
    """A path prefix whose unmatched requests get a specific 404 type (e.g. RouteNotAllowed)."""

    prefix: tuple[str, ...]
    error_type: str
    lakekeeper: bool


class SegmentRouter:
    """Routes by exact segment count and literals; captures are raw (still percent-encoded)."""

    def __init__(self) -> None:
        self._by_len: dict[int, list[Route]] = {}
        self._fences: list[Fence] = []

    def add(self, routes: Sequence[Route]) -> None:
        for route in routes:
            self._by_len.setdefault(len(route.pattern), []).append(route)

    def fence(self, prefix: tuple[str, ...], error_type: str, *, lakekeeper: bool) -> None:
        self._fences.append(Fence(prefix, error_type, lakekeeper))

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
