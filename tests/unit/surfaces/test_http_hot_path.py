"""The credential routes' at-once answer (a confirmed cache hit, no coroutine) against the real
service: the same status, headers and bytes as the awaited path for the same state, never an
entry past its serve floor, and nothing kept past an invalidation.

FakeOperations has no synchronous hits, so these run the daemon's App over the real core (the
in-memory catalog, a fake clock that moves only when told).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from gateway.app import App
from gateway.service import build_core
from gateway.surfaces.ingress import Gate
from tests.fakes.catalog import FakeCatalog, FakeIdP
from tests.fakes.clock import FakeClock
from tests.fakes.rng import seeded
from tests.fakes.settings import make_settings

MARK = {"X-Lakegate-Request": "1"}
NATIVE = "/v1/warehouses/demo/namespaces/ns/tables/orders/credentials?access=read"
AWS = "/v1/aws-credentials/demo/ns/orders?access=read"
LIFETIME_S = 3600.0
FLOOR_S = 300.0  # CACHE__MIN_REMAINING_S (the default)

Answer = tuple[int, dict[str, str], bytes]


class Gateway:
    def __init__(self, app: App, clock: FakeClock, http: aiohttp.ClientSession) -> None:
        self.app, self.clock, self.http = app, clock, http

    async def get(self, path: str) -> Answer:
        async with self.http.get(path, headers=MARK) as resp:
            headers = {k: v for k, v in resp.headers.items()
                       if k.lower() not in ("date", "x-request-id")}
            return resp.status, headers, await resp.read()

    async def doc(self, path: str) -> dict[str, Any]:
        status, _, body = await self.get(path)
        assert status == 200, body
        doc: dict[str, Any] = json.loads(body)
        return doc


@pytest.fixture
async def gateway(tmp_path: Path) -> AsyncIterator[Gateway]:
    clock = FakeClock()
    catalog = FakeCatalog(clock, credential_lifetime_s=LIFETIME_S)
    catalog.add_table(("ns",), "orders")
    settings = make_settings(**{
        "LISTEN__HTTP_PORT": "0", "LISTEN__GRPC_PORT": "0",
        "LISTEN__GRPC_UDS": str(tmp_path / "grpc.sock"), "SHUTDOWN_GRACE_S": "5",
        "CACHE__MIN_REMAINING_S": str(FLOOR_S),
    })
    app = App(settings, clock=clock, core_factory=lambda s, m, spawn: build_core(
        s, m, spawn, clock, transport=catalog.transport(FakeIdP()), rng=seeded(5)))
    await app.start()
    try:
        async with aiohttp.ClientSession(f"http://127.0.0.1:{app.http_port}") as http:
            yield Gateway(app, clock, http)
    finally:
        await app.shutdown()


async def _awaited(gw: Gateway, path: str, monkeypatch: pytest.MonkeyPatch) -> Answer:
    """One request through the awaited path: the policy decision is not taken at once."""
    with monkeypatch.context() as patch:
        patch.setattr(Gate, "authorize_now", lambda *args, **kwargs: False)
        return await gw.get(path)


@pytest.mark.parametrize("path", [NATIVE, AWS])
async def test_an_at_once_hit_is_the_awaited_paths_answer(
    gateway: Gateway, path: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    await gateway.get(path)  # the fill
    await gateway.get(path)  # a hit (the identity confirmed by the fill)
    at_once = await gateway.get(path)
    awaited = await _awaited(gateway, path, monkeypatch)
    assert at_once[0] == awaited[0] == 200
    assert at_once[1] == awaited[1]
    assert at_once[1]["Cache-Control"] == "no-store"
    assert at_once[2] == awaited[2]  # the clock stood still: the same bytes
    if path == NATIVE:
        assert json.loads(at_once[2])["outcome"] == "hit"


@pytest.mark.parametrize("path", [NATIVE, AWS])
async def test_an_entry_past_its_serve_floor_is_never_answered(gateway: Gateway,
                                                               path: str) -> None:
    first = await gateway.doc(path)
    hit = first | ({"outcome": "hit"} if path == NATIVE else {})
    assert await gateway.doc(path) == hit  # answered at once, from the memoized body
    gateway.clock.advance(LIFETIME_S - FLOOR_S + 1)  # below the floor now
    later = await gateway.doc(path)
    key = "AccessKeyId" if path == AWS else "credentials"
    assert later[key] != first[key]
    if path == NATIVE:
        assert later["remaining_s"] > FLOOR_S
        assert later["expires_at_ms"] / 1000 - gateway.clock.now() > FLOOR_S
    # and the new entry is served at once from here on
    assert await gateway.doc(path) == later | ({"outcome": "hit"} if path == NATIVE else {})


async def test_an_invalidated_entry_is_not_answered_from_the_memo(gateway: Gateway) -> None:
    first = await gateway.doc(NATIVE)
    aws_first = await gateway.doc(AWS)
    assert (await gateway.doc(NATIVE))["outcome"] == "hit"
    async with gateway.http.post("/v1/cache/invalidate", headers=MARK, json={
            "warehouse": "demo", "namespace": ["ns"], "table": "orders"}) as resp:
        assert resp.status == 200
    again = await gateway.doc(NATIVE)
    assert again["outcome"] == "miss"
    assert again["credentials"] != first["credentials"]
    assert (await gateway.doc(AWS))["AccessKeyId"] != aws_first["AccessKeyId"]


async def test_a_dropped_table_is_not_answered_from_the_memo(gateway: Gateway) -> None:
    for _ in range(2):  # the fill, then an at-once hit on both routes
        await gateway.doc(NATIVE)
        await gateway.doc(AWS)
    async with gateway.http.delete("/v1/warehouses/demo/namespaces/ns/tables/orders",
                                   headers=MARK) as resp:
        assert resp.status == 204
    for path in (NATIVE, AWS):
        status, _, body = await gateway.get(path)
        assert status == 404, body
