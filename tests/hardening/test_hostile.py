"""hardening/hostile.py's rate-limit suite against a real HTTP server with a known limiter."""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Iterator

import pytest
from aiohttp import web

from hardening.hostile import run_rate_limit

NOISY, QUIET = "noisy", "quiet"  # caller tokens of this test server


@contextlib.contextmanager
def limited_server(burst: int, retry_after: bool) -> Iterator[str]:
    """Serve on a thread: `noisy` gets 429 after `burst` requests, `quiet` always 200."""
    loop = asyncio.new_event_loop()
    seen = {"noisy": 0}
    ready, stop, box = threading.Event(), asyncio.Event(), {}

    async def handle(request: web.Request) -> web.Response:
        if request.headers.get("Authorization") == f"Bearer {NOISY}":
            seen["noisy"] += 1
            if seen["noisy"] > burst:
                headers = {"Retry-After": "1"} if retry_after else {}
                return web.Response(status=429, headers=headers)
        return web.Response(text="ok")

    async def serve() -> None:
        app = web.Application()
        app.router.add_get("/t", handle)
        runner = web.AppRunner(app)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        box["url"] = f"http://127.0.0.1:{runner.addresses[0][1]}"
        ready.set()
        await stop.wait()
        await runner.cleanup()

    thread = threading.Thread(target=loop.run_until_complete, args=(serve(),), daemon=True)
    thread.start()
    assert ready.wait(10)
    yield box["url"]
    loop.call_soon_threadsafe(stop.set)
    thread.join(10)


@pytest.mark.parametrize("retry_after", [True, False])
def test_noisy_caller_is_limited_and_the_quiet_one_served(retry_after: bool) -> None:
    with limited_server(burst=5, retry_after=retry_after) as url:
        tally, stats = run_rate_limit(
            url, "/t", noisy_token=NOISY, quiet_token=QUIET, burst=5, seconds=0.5
        )
    assert stats["noisy_200"] == 5
    assert stats["noisy_429"] > 0
    assert stats["noisy_other"] == 0
    assert stats["quiet_200"] > 0
    assert stats["quiet_other"] == 0
    assert tally.problems == []
    assert stats.get("missing_retry_after", 0) == (0 if retry_after else stats["noisy_429"])
