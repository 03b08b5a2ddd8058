"""TableIndex: a cache's keys by table, lazily validated against the cache, memory-bounded; and
the caches that use it (an invalidation of one table costs O(its keys), not O(cache))."""

import statistics
import time
from collections import OrderedDict

import pytest

from gateway.cache.credential_cache import CredentialCache
from gateway.cache.table_index import REBUILD_SLACK, TableIndex, TableMatch
from gateway.models import AccessMode, CacheKey, RequestContext
from gateway.settings import CacheSettings
from tests.fakes.fetcher import FakeFetcher
from tests.fakes.rng import seeded

CTX = RequestContext(request_id="req-1")


def key(table: str, access: AccessMode = AccessMode.READ, kind: str = "generic",
        ns: tuple[str, ...] = ("NS",)) -> CacheKey:
    return CacheKey.of(project=None, warehouse_id="WH", namespace=ns, table=table,
                       access=access, kind=kind)  # type: ignore[arg-type]


def test_a_table_match_folds_once_and_agrees_with_same_table() -> None:
    keys = [key("Orders"), key("orders", AccessMode.WRITE), key("a+b", kind="iceberg"),
            key("a b"), key("a+b"), key("orders", ns=("other",))]
    for name in ("ORDERS", "a+b", "a b"):
        match = TableMatch.of("wh", ("ns",), name)
        assert [match(k) for k in keys] == [k.same_table("wh", ("ns",), name) for k in keys]


def test_keys_of_gives_the_live_keys_of_one_table_and_forgets_the_others() -> None:
    entries: OrderedDict[CacheKey, int] = OrderedDict()
    index = TableIndex(entries)
    for k in (key("t"), key("t", AccessMode.WRITE), key("u"), key("T+1", kind="iceberg")):
        entries[k] = 1
        index.add(k)
    del entries[key("t", AccessMode.WRITE)]  # removed without telling the index
    assert index.keys_of(TableMatch.of("wh", ("ns",), "T")) == [key("t")]
    assert len(index) == 3  # the removed key was pruned on the way
    assert index.keys_of(TableMatch.of("wh", ("ns",), "t 1")) == [key("T+1", kind="iceberg")]
    assert index.keys_of(TableMatch.of("wh", ("ns",), "missing")) == []


def test_the_index_stays_within_twice_its_container() -> None:
    entries: OrderedDict[CacheKey, int] = OrderedDict()
    index = TableIndex(entries)
    for i in range(5000):  # a churning LRU of 10 keys: removals are never reported
        k = key(f"t{i}")
        entries[k] = i
        index.add(k)
        if len(entries) > 10:
            entries.popitem(last=False)
        assert len(index) <= 2 * (len(entries) + 1) + REBUILD_SLACK  # +1: added before the pop
    assert index.keys_of(TableMatch.of("wh", ("ns",), "t4999")) == [key("t4999")]


def _drop_cost_s(cache: CredentialCache, rounds: int = 300) -> float:
    samples = []
    for i in range(rounds):
        start = time.perf_counter()
        cache.invalidate_table("wh", ("ns",), f"absent{i}")
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


@pytest.mark.parametrize("small", [100])
async def test_invalidating_one_table_costs_the_same_with_a_hundred_or_ten_thousand_keys(
    small: int, clock, metrics, registry
) -> None:
    # A change event names a table; scanning every key for it made an event cost O(cache)
    # (found: ~236 small events a second saturated the loop with 2,000 keys).
    costs = []
    for n in (small, 10_000):
        cache = CredentialCache(FakeFetcher(clock), CacheSettings(max_entries=20_000), clock,
                                metrics, registry.spawn, deadline_s=30, rng=seeded(7))
        for i in range(n):
            await cache.get(key(f"t{i}"), CTX)
        assert len(cache) == n
        costs.append(_drop_cost_s(cache))
    assert costs[1] < 10 * costs[0], costs  # O(cache) measured ~100x here
