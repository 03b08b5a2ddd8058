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
        ("POST", "/storage/v1/b/wh/o/lake%2Ft1%2Fa/moveTo/o/lake%2Ft2%2Fb", {}, b"", "",
         Access("wh", ("lake/t1/a", "lake/t2/b"), writes=True)),  # was: one name, dst unchecked
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


def _batch(*parts: tuple[str, str, str | None]) -> tuple[bytes, str]:
    """A batch as the GCS connector sends one: (method, target, own bearer token or None)."""
    out = b""
    for i, (method, target, token) in enumerate(parts):
        auth = f"Authorization: Bearer {token}\r\n" if token else ""
        out += (f"--==b==\r\nContent-Type: application/http\r\nContent-ID: <item{i}>\r\n\r\n"
                f"{method} {target} HTTP/1.1\r\n{auth}Content-Length: 0\r\n\r\n\r\n").encode()
    return out + b"--==b==--\r\n", 'multipart/mixed; boundary="==b=="'


async def test_a_batch_is_checked_part_by_part_and_refused_whole() -> None:
    """The GCS connector's rename sends its copies and deletes as one batch: the guard refused
    every batch (Spark's task commit on GCS failed); now each part passes the single-request
    rules, and a batch smuggling another table's object is refused with none of it forwarded."""
    from aiohttp import ClientSession, web
    from aiohttp.test_utils import TestServer

    from devstack.gcs_batch import parse_batch
    from devstack.gcs_guard import GUARD_STATE, create_app

    seen: list[tuple[str, str]] = []

    async def store(request: web.Request) -> web.Response:
        seen.append((request.method, request.raw_path))
        return web.json_response({"name": "x"})

    other = mint(TokenGrant("wh", "lake/t2", "write", WRITE.expires_at_ms), KEY)
    ok = "/storage/v1/b/wh/o/lake%2Ft1%2Fa"
    copy = "/storage/v1/b/wh/o/lake%2Ft1%2Fa/rewriteTo/b/wh/o/lake%2Ft1%2Fb"
    upstream = web.Application()
    upstream.router.add_route("*", "/{tail:.*}", store)
    async with TestServer(upstream, host="127.0.0.1") as up:
        guard = create_app(str(up.make_url("")), [KEY])
        async with TestServer(guard, host="127.0.0.1") as gs:
            guard[GUARD_STATE].now_ms = lambda: 1_900_000_000_000
            url = str(gs.make_url("/batch/storage/v1"))
            write, read = mint(WRITE, KEY), mint(READ, KEY)
            refused = [
                # another table's object, a part's own token for another table, dot segments,
                # a read token deleting, no token at all, an upload inside a batch
                (write, [("DELETE", ok, None), ("DELETE", ok.replace("t1", "t2"), None)]),
                (write, [("DELETE", ok, None), ("DELETE", ok, other)]),
                (write, [("DELETE", "/storage/v1/b/wh/o/lake%2Ft1%2F..%2Ft2%2Fx", None)]),
                (read, [("GET", ok, None), ("DELETE", ok, None)]),
                (None, [("DELETE", ok, None)]),
                (write, [("POST", "/upload/storage/v1/b/wh/o?name=lake/t1/u", None)]),
                (write, [("DELETE", "/storage/v1/b/other/o/lake%2Ft1%2Fa", None)]),
            ]
            async with ClientSession() as http:
                for token, parts in refused:
                    body, ctype = _batch(*parts)
                    headers = {"Content-Type": ctype}
                    if token:
                        headers["Authorization"] = f"Bearer {token}"
                    async with http.post(url, data=body, headers=headers) as resp:
                        assert resp.status in (400, 401, 403), parts
                assert seen == []
                async with http.post(url, data=b"not a batch", headers={
                        "Content-Type": "multipart/mixed; boundary=x",
                        "Authorization": f"Bearer {write}"}) as resp:  # fmt: skip
                    assert resp.status == 400
                body, ctype = _batch(("POST", f"http://127.0.0.1:1{copy}", None),
                                     ("DELETE", ok, write))  # fmt: skip
                async with http.post(url, data=body, headers={
                        "Content-Type": ctype, "Authorization": f"Bearer {write}"}) as resp:
                    assert resp.status == 200
                    answer_type = resp.headers["Content-Type"]
                    answer = await resp.read()
    assert seen == [("POST", copy), ("DELETE", ok)]
    assert answer_type.startswith("multipart/mixed; boundary=")
    # The answer is a batch of HTTP responses, one per request, in order, with response ids.
    text = answer.decode()
    assert text.count("HTTP/1.1 200 OK") == 2
    assert text.index("<response-item0>") < text.index("<response-item1>")
    assert len(parse_batch(body, ctype)) == 2


def test_a_copy_body_is_made_readable_for_the_stand_in() -> None:
    """The GCS connector's rewrite sends its metadata gzip-encoded or empty: fake-gcs-server
    answered 500 (`EOF`) and every Spark task commit on GCS failed."""
    import gzip

    from devstack.gcs_guard import _plain_copy_body

    headers = {"Content-Encoding": "gzip", "Content-Type": "application/json; charset=UTF-8"}
    assert _plain_copy_body(gzip.compress(b'{"a": 1}'), headers) == b'{"a": 1}'
    assert "Content-Encoding" not in headers
    headers = {"Content-Type": "application/octet-stream"}
    assert _plain_copy_body(b"", headers) == b"{}"
    assert headers == {"Content-Type": "application/json"}
