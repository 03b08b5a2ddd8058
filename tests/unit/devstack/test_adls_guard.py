"""The ADLS SAS-checking layer (devstack/adls_guard.py): a directory SAS (`sr=d`, as Lakekeeper
vends it) is checked as Azure checks it and forwarded with the layer's container SAS; anything
else passes to Azurite unchanged."""

from __future__ import annotations

import datetime as dt
from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiohttp import ClientSession, web
from aiohttp.test_utils import TestServer
from yarl import URL

from devstack.adls_guard import GUARD_STATE, create_app
from devstack.emulator.sas import DEV_ACCOUNT, DEV_ACCOUNT_KEY, SasRequest, sign

NOW = dt.datetime(2026, 12, 8, 0, 0, tzinfo=dt.UTC)
ACCOUNT = DEV_ACCOUNT


def directory_sas(path: str, permissions: str, *, expiry_s: int = 3600,
                  key: str = DEV_ACCOUNT_KEY) -> str:
    return sign(SasRequest(ACCOUNT, "warehouse", permissions, NOW - dt.timedelta(seconds=60),
                           NOW + dt.timedelta(seconds=expiry_s), resource="d", path=path), key)


@pytest.fixture
async def layer() -> AsyncIterator[dict[str, Any]]:
    seen: list[tuple[str, str]] = []

    async def store(request: web.Request) -> web.Response:
        seen.append((request.method, request.raw_path))
        return web.Response(body=b"" if request.method == "HEAD" else b"data",
                            headers={"Content-Length": "4"} if request.method == "HEAD"
                            else None)

    upstream = web.Application()
    upstream.router.add_route("*", "/{tail:.*}", store)
    async with TestServer(upstream, host="127.0.0.1") as up:
        app = create_app(str(up.make_url("")).rstrip("/"), ACCOUNT, DEV_ACCOUNT_KEY)
        async with TestServer(app, host="127.0.0.1") as guard:
            app[GUARD_STATE].now = lambda: NOW
            async with ClientSession() as http:
                yield {"http": http, "base": str(guard.make_url("")).rstrip("/"), "seen": seen}


async def _call(layer: dict[str, Any], method: str, target: str) -> int:
    url = URL(layer["base"] + target, encoded=True)
    async with layer["http"].request(method, url, data=b"x" if method == "PUT" else None) as r:
        await r.read()
        return r.status


BLOB = f"/{ACCOUNT}/warehouse/lake/t1/part-0.parquet"


async def test_a_directory_sas_works_inside_its_directory_only(layer) -> None:
    rw = directory_sas("lake/t1", "rawdl")
    assert await _call(layer, "PUT", f"{BLOB}?{rw}") == 200
    assert await _call(layer, "GET", f"{BLOB}?{rw}") == 200
    assert await _call(layer, "DELETE", f"{BLOB}?{rw}") == 200
    listing = f"/{ACCOUNT}/warehouse?restype=container&comp=list&prefix=lake%2Ft1%2F&{rw}"
    assert await _call(layer, "GET", listing) == 200
    # forwarded on the raw path, the SAS replaced by the layer's container SAS
    method, forwarded = layer["seen"][0]
    assert method == "PUT"
    assert forwarded.startswith(BLOB + "?")
    assert "sr=c" in forwarded
    assert "sr=d" not in forwarded
    assert "sdd=" not in forwarded
    assert layer["seen"][-1][1].endswith("restype=container&comp=list&prefix=lake%2Ft1%2F")
    count = len(layer["seen"])
    for method, target in (
        ("GET", f"/{ACCOUNT}/warehouse/lake/t2/part-0.parquet?{rw}"),  # another table
        ("PUT", f"/{ACCOUNT}/warehouse/lake/t2/planted?{rw}"),
        ("DELETE", f"/{ACCOUNT}/warehouse/lake/t2/part-0.parquet?{rw}"),
        ("GET", f"/{ACCOUNT}/warehouse/lake/t10/part-0.parquet?{rw}"),  # a sibling prefix
        ("GET", f"/{ACCOUNT}/warehouse?restype=container&comp=list&prefix=lake%2Ft2%2F&{rw}"),
        ("GET", f"/{ACCOUNT}/warehouse?restype=container&comp=list&prefix=lake%2Ft1&{rw}"),
        ("GET", f"/{ACCOUNT}/warehouse?restype=container&comp=list&{rw}"),
        ("GET", f"/{ACCOUNT}/warehouse/lake/t1/../t2/part-0.parquet?{rw}"),
        ("GET", f"/{ACCOUNT}/warehouse/lake/t1%2F..%2Ft2/part-0.parquet?{rw}"),
        ("GET", f"/{ACCOUNT}/other/lake/t1/part-0.parquet?{rw}"),  # another container
        ("PUT", f"/{ACCOUNT}/warehouse?restype=container&{rw}"),  # container calls
        ("GET", f"{BLOB}?{rw.replace('sdd=2', 'sdd=1')}"),  # a wider directory: not signed
    ):
        assert await _call(layer, method, target) in (400, 403), target
    assert len(layer["seen"]) == count  # none reached the store


async def test_permissions_expiry_and_the_key_are_checked(layer) -> None:
    read = directory_sas("lake/t1", "rl")
    assert await _call(layer, "GET", f"{BLOB}?{read}") == 200
    assert await _call(layer, "PUT", f"{BLOB}?{read}") == 403
    assert await _call(layer, "DELETE", f"{BLOB}?{read}") == 403
    expired = directory_sas("lake/t1", "rl", expiry_s=-1)
    assert await _call(layer, "GET", f"{BLOB}?{expired}") == 403
    forged = directory_sas("lake/t1", "rawdl", key="a2V5LW9mLWFub3RoZXItYWNjb3VudA==")
    assert await _call(layer, "GET", f"{BLOB}?{forged}") == 403
    widened = read.replace("sp=rl", "sp=rawdl")  # permissions are signed
    assert await _call(layer, "PUT", f"{BLOB}?{widened}") == 403
    assert len(layer["seen"]) == 1


async def test_a_head_keeps_the_blobs_length_and_other_credentials_pass(layer) -> None:
    read = directory_sas("lake/t1", "rl")
    url = URL(f"{layer['base']}{BLOB}?{read}", encoded=True)
    async with layer["http"].head(url) as resp:
        assert resp.status == 200
        assert resp.headers["Content-Length"] == "4"
    # a container SAS (or a shared key) is Azurite's to check: passed as it is
    container = sign(SasRequest(ACCOUNT, "warehouse", "rl", NOW, NOW), DEV_ACCOUNT_KEY)
    assert await _call(layer, "GET", f"{BLOB}?{container}") == 200
    assert layer["seen"][-1][1] == f"{BLOB}?{container}"
