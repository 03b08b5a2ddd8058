"""The GCS token-checking layer: which objects a request names, and what a grant allows."""

from __future__ import annotations

import pytest
from yarl import URL

from devstack.emulator.gcs_tokens import TokenGrant, mint, signing_key
from devstack.gcs_guard import Access, GuardState, Refused, classify

KEY = signing_key("sa-private-key")
READ = TokenGrant("wh", "lake/t1", "read", 2_000_000_000_000)
WRITE = TokenGrant("wh", "lake/t1", "write", 2_000_000_000_000)


def _state(now_ms: int = 1_900_000_000_000) -> GuardState:
    return GuardState(upstream="http://up", keys=(KEY,), now_ms=lambda: now_ms)


@pytest.mark.parametrize(
    ("method", "path", "query", "body", "ctype", "expected"),
    [
        ("GET", "/storage/v1/b/wh/o/lake%2Ft1%2Fa", {}, b"", "",
         Access("wh", ("lake/t1/a",))),
        ("GET", "/download/storage/v1/b/wh/o/lake%2Ft1%2Fa", {"alt": "media"}, b"", "",
         Access("wh", ("lake/t1/a",))),
        ("GET", "/storage/v1/b/wh/o", {"prefix": "lake/t1/"}, b"", "",
         Access("wh", prefix="lake/t1/")),
        ("DELETE", "/storage/v1/b/wh/o/lake%2Ft1%2Fa", {}, b"", "",
         Access("wh", ("lake/t1/a",), writes=True)),
        ("POST", "/upload/storage/v1/b/wh/o", {"uploadType": "media", "name": "lake/t1/a"}, b"",
         "", Access("wh", ("lake/t1/a",), writes=True)),
        ("POST", "/upload/storage/v1/b/wh/o", {"uploadType": "multipart"},
         b'--==0==\nContent-Type: application/json\n\n{"name": "lake/t1/m"}\n--==0==\n\nx',
         'multipart/related; boundary="==0=="', Access("wh", ("lake/t1/m",), writes=True)),
        ("POST", "/upload/storage/v1/b/wh/o", {"uploadType": "resumable"},
         b'{"name": "lake/t1/r"}', "application/json", Access("wh", ("lake/t1/r",), writes=True)),
        ("POST", "/storage/v1/b/wh/o/lake%2Ft1%2Fa/rewriteTo/b/wh/o/lake%2Ft1%2Fb", {}, b"", "",
         Access("wh", ("lake/t1/a", "lake/t1/b"), writes=True)),
        ("GET", "/wh/lake/t1/a", {}, b"", "", Access("wh", ("lake/t1/a",))),
        ("GET", "/wh", {"list-type": "2", "prefix": "lake/t1/"}, b"", "",
         Access("wh", prefix="lake/t1/")),
    ],
)  # fmt: skip
def test_classify_names_the_bucket_objects_and_writes(method, path, query, body, ctype, expected):
    assert classify(method, path, query, body, ctype) == expected


def test_unknown_shapes_are_refused_not_passed() -> None:
    with pytest.raises(Refused):
        classify("POST", "/upload/storage/v1/b/wh/o", {"uploadType": "media"}, b"", "")
    with pytest.raises(Refused):
        classify("POST", "/storage/v1/b/wh/o/a/rewriteTo/b/other/o/b", {}, b"", "")
    with pytest.raises(Refused):
        classify("PUT", "/wh", {}, b"", "")


def test_tokens_must_be_ours_and_unexpired() -> None:
    state = _state()
    assert state.grant(f"Bearer {mint(READ, KEY)}") == READ
    for header in (None, "Basic x", f"Bearer {mint(READ, signing_key('other'))}"):
        with pytest.raises(Refused) as info:
            state.grant(header)
        assert info.value.status == 401
    with pytest.raises(Refused) as info:
        _state(now_ms=READ.expires_at_ms).grant(f"Bearer {mint(READ, KEY)}")
    assert info.value.status == 401


@pytest.mark.parametrize(
    ("grant", "access", "allowed"),
    [
        (READ, Access("wh", ("lake/t1/a",)), True),
        (READ, Access("wh", ("lake/t1",)), True),
        (READ, Access("wh", ("lake/t10/a",)), False),  # a sibling prefix is outside
        (READ, Access("wh", ("lake/t1/a",), writes=True), False),
        (WRITE, Access("wh", ("lake/t1/a",), writes=True), True),
        (WRITE, Access("wh", ("lake/t1/a", "lake/t2/b"), writes=True), False),
        (READ, Access("other", ("lake/t1/a",)), False),
        (READ, Access("wh", prefix="lake/t1/"), True),
        (READ, Access("wh", prefix="lake/"), False),
        (WRITE, Access("wh", writes=True), False),  # bucket changes
    ],
)
def test_a_grant_allows_its_role_on_its_prefix_only(grant, access, allowed) -> None:
    state = _state()
    if allowed:
        state.check(grant, access)
    else:
        with pytest.raises(Refused) as info:
            state.check(grant, access)
        assert info.value.status == 403


def test_a_resumable_session_is_bound_to_the_object_it_was_started_for() -> None:
    state = _state()
    state.uploads["u1"] = ("wh", "lake/t1/r")
    state.check(WRITE, Access("wh", ("\0upload:u1",), writes=True))
    other = TokenGrant("wh", "lake/t2", "write", WRITE.expires_at_ms)
    with pytest.raises(Refused):
        state.check(other, Access("wh", ("\0upload:u1",), writes=True))
    with pytest.raises(Refused):
        state.check(WRITE, Access("wh", ("\0upload:unknown",), writes=True))


async def test_the_guard_forwards_the_path_it_decided_on_and_refuses_dot_segments() -> None:
    """Issue 50 item 7: the guard checked `lake/t1/../t2/secret` (inside `lake/t1`) and
    forwarded the normalised `lake/t2/secret`: a token for one table read and deleted another's
    objects."""
    from aiohttp import ClientSession, web
    from aiohttp.test_utils import TestServer

    from devstack.gcs_guard import GUARD_STATE, create_app

    seen: list[str] = []

    async def store(request: web.Request) -> web.Response:
        seen.append(request.raw_path)
        return web.json_response({})

    upstream = web.Application()
    upstream.router.add_route("*", "/{tail:.*}", store)
    async with TestServer(upstream, host="127.0.0.1") as up:
        guard = create_app(str(up.make_url("")), [KEY])
        async with TestServer(guard, host="127.0.0.1") as gs:
            guard[GUARD_STATE].now_ms = lambda: 1_900_000_000_000
            auth = {"Authorization": f"Bearer {mint(WRITE, KEY)}"}
            base = str(gs.make_url(""))
            async with ClientSession() as http:
                for method, target in (
                    ("GET", "/download/storage/v1/b/wh/o/lake/t1/../t2/secret?alt=media"),
                    ("DELETE", "/storage/v1/b/wh/o/lake/t1/../t2/secret"),
                    ("GET", "/storage/v1/b/wh/o/lake%2Ft1%2F..%2Ft2%2Fsecret"),
                    ("GET", "/storage/v1/b/wh/o/lake%2Ft1%2F%2E%2E%2Ft2%2Fsecret"),
                    ("GET", "/wh/lake/t1/../t2/secret"),
                    ("GET", "/storage/v1/b/wh/o?prefix=lake/t1/../t2/"),
                ):
                    url = URL(base.rstrip("/") + target, encoded=True)
                    async with http.request(method, url, headers=auth) as resp:
                        assert resp.status in (400, 403), target
                assert seen == []
                target = "/storage/v1/b/wh/o/lake%2Ft1%2Fa%2Bb?alt=json"
                async with http.get(URL(base.rstrip("/") + target, encoded=True),
                                    headers=auth) as resp:
                    assert resp.status == 200
                assert seen == ["/storage/v1/b/wh/o/lake%2Ft1%2Fa%2Bb?alt=json"]
