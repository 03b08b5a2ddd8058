"""MetadataCache: one shared load per table, and invalidations that reach loads in flight."""

import asyncio

from gateway.cache.metadata_cache import MetadataCache
from gateway.models import AccessMode, CacheKey, GenericTable

KEY = CacheKey.of(project=None, warehouse_id="wh", namespace=("ns",), table="t",
                  access=AccessMode.READ, delegation="client-managed")


def table(location: str) -> GenericTable:
    return GenericTable(name="t", format="lance", base_location=location)


def make(clock, registry, generation=lambda: 0, ttl_s: float = 5.0) -> MetadataCache:
    return MetadataCache(ttl_s=ttl_s, max_entries=100, clock=clock, spawn=registry.spawn,
                         generation=generation, wait_s=30)


async def settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


async def test_a_herd_shares_one_load_and_the_answer_is_stored(clock, registry):
    cache = make(clock, registry)
    loads = 0

    async def load() -> GenericTable:
        nonlocal loads
        loads += 1
        await asyncio.sleep(0)
        return table("s3://b/t")

    results = await asyncio.gather(*(cache.get(KEY, load) for _ in range(20)))
    assert {r.base_location for r in results} == {"s3://b/t"}
    await cache.get(KEY, load)
    assert loads == 1
    clock.advance(5)
    await cache.get(KEY, load)
    assert loads == 2


async def test_a_caller_after_an_invalidation_never_joins_a_load_from_before(clock, registry):
    # #33 finding 7: invalidate_table dropped the stored loads but not the one in flight; a
    # caller after a drop and re-create joined it and got the old table (a spurious 409 for a
    # vended load whose credential is the new table's).
    generation = [0]
    cache = make(clock, registry, generation=lambda: generation[0])
    gate = asyncio.Event()

    async def old_load() -> GenericTable:
        await gate.wait()
        return table("s3://b/old")

    async def new_load() -> GenericTable:
        return table("s3://b/new")

    before = asyncio.ensure_future(cache.get(KEY, old_load))
    await settle()
    generation[0] += 1
    assert cache.invalidate_table("WH", ("NS",), "t") == 0  # nothing stored yet
    after = asyncio.ensure_future(cache.get(KEY, new_load))
    await settle()
    gate.set()
    old, new = await asyncio.gather(before, after)
    assert old.base_location == "s3://b/old"  # its own caller still gets its answer
    assert new.base_location == "s3://b/new"
    assert (await cache.get(KEY, old_load)).base_location == "s3://b/new"  # stored: the new


async def test_clear_detaches_loads_in_flight_too(clock, registry):
    cache = make(clock, registry)
    gate = asyncio.Event()

    async def old_load() -> GenericTable:
        await gate.wait()
        return table("s3://b/old")

    async def new_load() -> GenericTable:
        return table("s3://b/new")

    before = asyncio.ensure_future(cache.get(KEY, old_load))
    await settle()
    cache.clear()
    assert (await cache.get(KEY, new_load)).base_location == "s3://b/new"
    gate.set()
    await before
