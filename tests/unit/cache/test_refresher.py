import asyncio
import contextlib
from collections import Counter

from gateway.cache.credential_cache import CredentialCache
from gateway.cache.refresher import RefreshAhead
from gateway.errors import UnavailableError
from gateway.metrics import Metrics
from gateway.models import AccessMode, CacheKey, Outcome, RequestContext
from gateway.settings import CacheSettings
from tests.fakes.clock import FakeClock
from tests.fakes.fetcher import FakeFetcher
from tests.fakes.rng import seeded

CTX = RequestContext(request_id="req-1")


def key(table: str = "t") -> CacheKey:
    return CacheKey.of(project=None, warehouse_id="wh", namespace=("ns",), table=table,
                       access=AccessMode.READ)


def build(clock, registry, fetcher, **settings):
    cfg = CacheSettings(**{"min_remaining_s": 300, "refresh_lead_s": 900, **settings})
    metrics = Metrics()
    cache = CredentialCache(fetcher, cfg, clock, metrics, registry.spawn, deadline_s=30,
                            rng=seeded(3))
    return cache, RefreshAhead(cache, cfg, clock, metrics, registry.spawn), metrics


async def test_hot_key_is_refreshed_in_background_and_never_misses_after_the_first(registry):
    clock = FakeClock()
    fetcher = FakeFetcher(clock, lifetime_s=1200)  # short: the lead window opens after 300 s
    cache, refresher, metrics = build(clock, registry, fetcher)
    refresher.start()
    outcomes: Counter[Outcome] = Counter()
    lowest = float("inf")
    for _ in range(1080):  # 3 hours of fake time, one request every 10 s
        value, outcome = await cache.get(key(), CTX)
        outcomes[outcome] += 1
        lowest = min(lowest, value.remaining_s(clock.now()))
        await clock.run_for(10, step=10)
    assert outcomes[Outcome.MISS] == 1
    assert outcomes[Outcome.HIT] == 1079
    assert lowest > 300
    assert fetcher.calls >= 10  # ~one refresh per 300-400 s of life
    assert metrics.registry.get_sample_value(
        "lakegate_refresh_total", {"reason": "ahead", "status": "ok"}) == fetcher.calls - 1
    await refresher.close()


async def test_idle_key_is_not_refreshed_and_gets_evicted(registry):
    clock = FakeClock()
    fetcher = FakeFetcher(clock, lifetime_s=3600)
    cache, refresher, metrics = build(clock, registry, fetcher, idle_s=600)
    refresher.start()
    await cache.get(key(), CTX)
    await clock.run_for(3600, step=30)
    assert fetcher.calls == 1
    assert key() not in cache
    assert metrics.registry.get_sample_value("lakegate_evictions_total",
                                             {"reason": "idle"}) == 1
    await refresher.close()


async def test_refreshes_are_rate_limited_through_the_queue(registry):
    clock = FakeClock()
    fetcher = FakeFetcher(clock, lifetime_s=3600)
    cache, refresher, metrics = build(clock, registry, fetcher, refresh_rate_per_s=10,
                                      refresh_jitter=0.0, idle_s=7200)
    for i in range(100):
        await cache.get(key(f"t{i}"), CTX)
    assert fetcher.calls == 100
    clock.advance(3600 - 800)  # every key is due at once
    run = asyncio.ensure_future(refresher.run_once())
    await clock.settle()
    started_at_once = fetcher.calls - 100
    assert started_at_once == 10  # the burst: one second of tokens
    assert metrics.refresh_queue_depth._value.get() == 90
    for _ in range(9):
        await clock.run_for(1.0, step=0.1)
    async with asyncio.timeout(5):
        await run
    assert fetcher.calls == 200
    assert metrics.refresh_queue_depth._value.get() == 0


async def test_failed_refresh_backs_off_instead_of_hammering(registry):
    clock = FakeClock()
    fetcher = FakeFetcher(clock, lifetime_s=1200)
    cache, refresher, _ = build(clock, registry, fetcher, idle_s=7200)
    await cache.get(key(), CTX)
    fetcher.fail_always = UnavailableError("catalog down")
    refresher.start()
    for _ in range(60):  # 10 minutes, touching the key every 10 s
        await clock.run_for(10, step=10)
        with contextlib.suppress(UnavailableError):
            await cache.get(key(), CTX)
    # due after ~300 s, then retried with backoff capped at 60 s: far fewer than one per scan
    assert 2 <= fetcher.calls - 1 <= 20
    await refresher.close()


async def test_close_cancels_the_loop(registry):
    clock = FakeClock()
    _, refresher, _ = build(clock, registry, FakeFetcher(clock))
    refresher.start()
    await clock.settle()
    assert registry.live == 1
    await refresher.close()
    assert registry.live == 0


async def test_fresh_entries_do_not_wake_the_refresher_but_short_lived_ones_do(registry):
    clock = FakeClock()
    fetcher = FakeFetcher(clock, lifetime_s=3600)
    cache, _, _ = build(clock, registry, fetcher)
    wake = asyncio.Event()
    cache.attach_wakeup(wake)
    cache.plan_scan(clock.monotonic() + 5)
    await cache.get(key("fresh"), CTX)
    assert not wake.is_set()  # due in ~45 min: the next planned scan is soon enough
    fetcher.lifetime_s = 400  # already inside the lead window
    await cache.get(key("short"), CTX)
    assert wake.is_set()
