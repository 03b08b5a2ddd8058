"""A paired run across worker processes (loadtest/workers.py): every worker alternates on the
same slice schedule and each side's answers are merged apart."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from aiohttp import web

from loadtest.bounds import Bounds
from loadtest.rawhttp import build_request
from loadtest.spec import LoadSpec
from loadtest.workers import run_load, run_pair


class CountingServers:
    """Two HTTP servers on Unix sockets, in a thread of their own, counting their answers."""

    def __init__(self, tmp: Path) -> None:
        self.paths = (tmp / "a.sock", tmp / "b.sock")
        self.hits = [0, 0]
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._runners: list[web.AppRunner] = []
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _app(self, index: int) -> web.Application:
        async def answer(_: web.Request) -> web.Response:
            self.hits[index] += 1
            return web.Response(body=b"{}", content_type="application/json")

        app = web.Application()
        app.router.add_get("/t", answer)
        return app

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        for index, path in enumerate(self.paths):
            runner = web.AppRunner(self._app(index), access_log=None)
            self._loop.run_until_complete(runner.setup())
            self._loop.run_until_complete(web.UnixSite(runner, str(path)).start())
            self._runners.append(runner)
        self._ready.set()
        self._loop.run_forever()

    def __enter__(self) -> CountingServers:
        self._thread.start()
        assert self._ready.wait(10)
        return self

    def __exit__(self, *_: object) -> None:
        for runner in self._runners:
            asyncio.run_coroutine_threadsafe(runner.cleanup(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)


@pytest.fixture
def servers(tmp_path: Path) -> Iterator[CountingServers]:
    with CountingServers(tmp_path) as both:
        yield both


def test_a_paired_run_over_two_workers_counts_each_server_apart(
    servers: CountingServers,
) -> None:
    request = build_request("GET", "/t", {})
    spec = LoadSpec(
        "http", f"unix:{servers.paths[0]}", request, "paired", 4, Bounds(10**6, 0.6),
        processes=2, pair_target=f"unix:{servers.paths[1]}", pair_payload=request,
        slice_s=0.05,
    )
    a, b = run_pair(spec)
    assert (a.errors, b.errors) == (0, 0)
    # No warm-up: every answer a server made is one its side counted, none the other's.
    assert (a.requests, b.requests) == tuple(servers.hits)
    assert a.requests > 0
    assert b.requests > 0
    # Each side ran half of the 0.6 s window (the longest worker's, merged).
    assert 0.25 <= a.elapsed_s <= 0.31
    assert 0.25 <= b.elapsed_s <= 0.31


def test_a_paired_spec_is_refused_by_the_single_server_runner() -> None:
    paired = LoadSpec("http", "unix:/a", b"", "paired", 1, Bounds(1, 1.0),
                      pair_target="unix:/b", slice_s=0.1)
    with pytest.raises(ValueError, match="run_pair"):
        run_load(paired)
    with pytest.raises(ValueError, match="paired"):
        run_pair(LoadSpec("http", "unix:/a", b"", "closed", 1, Bounds(1, 1.0)))
