"""The segment router (gateway/surfaces/http_routing.py): raw segments, 404 fences, 405."""

from __future__ import annotations

import pytest
from aiohttp import web

from gateway.errors import NotFoundError
from gateway.surfaces.http_routing import (
    HttpCall,
    Match,
    MethodNotAllowedError,
    OpenRoute,
    Route,
    SegmentRouter,
)


async def handler(call: HttpCall) -> web.StreamResponse:
    return web.Response()


async def open_handler(request: web.BaseRequest) -> web.StreamResponse:
    return web.Response()


def router() -> SegmentRouter:
    r = SegmentRouter()
    r.add([Route("GET", ("v1", "t", "{table}"), handler, "http", "metadata"),
           Route("DELETE", ("v1", "t", "{table}"), handler, "http", "metadata"),
           Route("GET", ("lakekeeper", "v1", "{wh}"), handler, "rest", "metadata"),
           OpenRoute("GET", ("livez",), open_handler)])
    r.fence(("lakekeeper",), "RouteNotAllowed", lakekeeper=True)
    return r


def test_captures_stay_raw_and_head_matches_get() -> None:
    match = router().match("HEAD", ["v1", "t", "a%2Fb"])
    assert match.params == {"table": "a%2Fb"}
    assert isinstance(match.route, Route)
    assert match.route.method == "GET"


def test_a_new_match_has_an_empty_memo() -> None:
    match = router().match("GET", ["v1", "t", "x"])
    assert isinstance(match, Match)
    assert (match.ref, match.access, match.body) == (None, None, None)


def test_wrong_method_is_405_and_unknown_paths_404_with_the_fence_type() -> None:
    with pytest.raises(MethodNotAllowedError):
        router().match("POST", ["v1", "t", "x"])
    with pytest.raises(NotFoundError) as info:
        router().match("GET", ["lakekeeper", "v2"])
    assert info.value.type_name == "RouteNotAllowed"
    with pytest.raises(NotFoundError) as info:
        router().match("GET", ["elsewhere"])
    assert info.value.type_name == "NotFound"


def test_rest_routes_carry_lakekeeper_headers_and_open_routes_do_not() -> None:
    r = router()
    assert r.match("GET", ["lakekeeper", "v1", "demo"]).route.lakekeeper
    assert not r.match("GET", ["v1", "t", "x"]).route.lakekeeper
    assert not r.match("GET", ["livez"]).route.lakekeeper
    assert r.fence_for(["lakekeeper", "zzz"]) == ("RouteNotAllowed", True)
    assert len(r.routes()) == 4
