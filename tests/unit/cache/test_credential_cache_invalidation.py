"""CredentialCache: invalidations against fetches in flight, and background refreshes that
race an eviction (the race half of docs/contracts.md's "drop/rename and an admin call
invalidate"; the single-path cases are in test_credential_cache.py)."""

import asyncio

import pytest

from gateway.cache.credential_cache import CredentialCache
from gateway.errors import NotFoundError
from gateway.models import AccessMode, CacheKey, Outcome, RequestContext
from gateway.settings import CacheSettings
from tests.fakes.fetcher import FakeFetcher
from tests.fakes.rng import seeded

CTX = RequestContext(request_id="req-1")


def key(table: str = "t", access: AccessMode = AccessMode.READ) -> CacheKey:
    return CacheKey.of(project=None, warehouse_id="wh", namespace=("ns",), table=table,
                       access=access)


def drop_t(cache: CredentialCache) -> int:
    return cache.invalidate_table("wh", ("ns",), "t")


@pytest.fixture
def fetcher(clock):
    return FakeFetcher(clock)


def make_cache(fetcher, clock, metrics, registry, **settings):
    cfg = CacheSettings(**{"min_remaining_s": 300, "refresh_lead_s": 900, **settings})
    return CredentialCache(fetcher, cfg, clock, metrics, registry.spawn, deadline_s=30,
                           rng=seeded(7))


async def settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


# --- defect 2: an invalidation detaches first-miss flights too ----------------------------

@pytest.mark.parametrize("invalidate", [drop_t, lambda c: c.invalidate_all(),
                                        lambda c: c.invalidate_key(key(access=AccessMode.WRITE))])
async def test_a_caller_after_an_invalidation_never_joins_a_first_miss_fetch_started_before(
    invalidate, fetcher, clock, metrics, registry
):
    cache = make_cache(fetcher, clock, metrics, registry)
    fetcher.gate = asyncio.Event()
    before = asyncio.ensure_future(cache.get(key(access=AccessMode.WRITE), CTX))
    await settle()
    invalidate(cache)  # e.g. drop_table(purge=True): no entry yet, a fetch in flight
    after = asyncio.ensure_future(cache.get(key(access=AccessMode.WRITE), CTX))
    await settle()
    fetcher.gate.set()
    (old, _), (new, outcome) = await asyncio.gather(before, after)
    assert fetcher.calls == 2
    assert new is not old  # was the same: the pre-drop credential
    assert outcome is Outcome.MISS
    stored, outcome = await cache.get(key(access=AccessMode.WRITE), CTX)
    assert stored is new  # the fetch from before the invalidation was not stored either
    assert outcome is Outcome.HIT


async def test_after_a_create_a_caller_never_gets_the_not_found_of_a_fetch_from_before(
    fetcher, clock, metrics, registry
):
    cache = make_cache(fetcher, clock, metrics, registry, negative_ttl_s=60)
    fetcher.gate = asyncio.Event()
    fetcher.errors.append(NotFoundError("no such table"))
    before = asyncio.ensure_future(cache.get(key(), CTX))
    await settle()
    drop_t(cache)  # the create invalidates the table
    after = asyncio.ensure_future(cache.get(key(), CTX))
    await settle()
    fetcher.gate.set()
    results = await asyncio.gather(before, after, return_exceptions=True)
    assert isinstance(results[0], NotFoundError)
    assert isinstance(results[1], tuple)  # was NotFoundError: joined the pre-create fetch
    value, outcome = await cache.get(key(), CTX)  # nor was the 404 negative-cached
    assert outcome is Outcome.HIT
    assert value is results[1][0]


# --- defect 3: an unrelated invalidation discards nothing ------------------------------

async def test_invalidations_of_other_tables_never_discard_a_hot_keys_fetch(
    fetcher, clock, metrics, registry
):
    cache = make_cache(fetcher, clock, metrics, registry)
    for i in range(10):
        fetcher.gate = asyncio.Event()
        call = asyncio.ensure_future(cache.get(key(), CTX))
        await settle()
        cache.invalidate_table("wh", ("ns",), f"other{i}")  # a create/drop elsewhere
        fetcher.gate.set()
        await call
    assert fetcher.calls == 1  # was 10: every fetch was discarded


async def test_an_unrelated_invalidation_does_not_discard_a_background_refresh(
    fetcher, clock, metrics, registry
):
    cache = make_cache(fetcher, clock, metrics, registry, idle_s=7200)
    old, _ = await cache.get(key(), CTX)
    clock.advance(3600 - 600)
    fetcher.gate = asyncio.Event()
    assert cache.start_refresh(key())
    await settle()
    cache.invalidate_table("wh", ("ns",), "other")
    fetcher.gate.set()
    await registry.drained()
    new, outcome = await cache.get(key(), CTX)
    assert new is not old  # was old: the refresh was thrown away ...
    assert outcome is Outcome.HIT
    assert cache.scan()[0] == []  # ... and the key due again at once, with no backoff
    assert fetcher.calls == 2


async def test_an_invalidation_of_the_table_discards_its_background_refresh(
    fetcher, clock, metrics, registry
):
    cache = make_cache(fetcher, clock, metrics, registry, idle_s=7200)
    await cache.get(key(), CTX)
    clock.advance(3600 - 600)
    fetcher.gate = asyncio.Event()
    assert cache.start_refresh(key())
    await settle()
    assert drop_t(cache) == 1
    fetcher.gate.set()
    await registry.drained()
    assert key() not in cache
    assert len(cache) == 0


# --- defect 5: a background refresh never resurrects an evicted key --------------------

async def refresh_then_evict_idle(fetcher, clock, metrics, registry) -> CredentialCache:
    """A key whose background refresh is held at the catalog while the idle scan evicts it."""
    cache = make_cache(fetcher, clock, metrics, registry, idle_s=1000)
    await cache.get(key(), CTX)
    clock.advance(3600 - 600)  # due (600 s left) ...
    cache._entries[key()].last_used_mono = clock.monotonic() - 900
    fetcher.gate = asyncio.Event()
    assert cache.start_refresh(key())
    await settle()
    clock.advance(200)  # now idle: the scan evicts it while its refresh runs
    cache.scan()
    assert key() not in cache
    return cache


async def test_a_refresh_in_flight_when_its_key_goes_idle_does_not_resurrect_it(
    fetcher, clock, metrics, registry
):
    cache = await refresh_then_evict_idle(fetcher, clock, metrics, registry)
    fetcher.gate.set()
    await registry.drained()
    assert key() not in cache  # was stored with last_used = now: one more idle window
    assert len(cache) == 0
    assert metrics.cache_entries._value.get() == 0


async def test_a_caller_who_joins_a_refresh_after_the_eviction_gets_the_key_stored(
    fetcher, clock, metrics, registry
):
    cache = await refresh_then_evict_idle(fetcher, clock, metrics, registry)
    waiter = asyncio.ensure_future(cache.get(key(), CTX))
    await settle()
    fetcher.gate.set()
    value, outcome = await waiter
    assert outcome is Outcome.COALESCED
    assert fetcher.calls == 2
    again, outcome = await cache.get(key(), CTX)
    assert again is value
    assert outcome is Outcome.HIT
