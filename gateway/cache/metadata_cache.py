"""MetadataCache: generic-table metadata for `metadata_ttl_s`, one shared load per table.

Why: a herd of vended loads of one table would otherwise each load the table from the catalog.
Loads are single-flight; a load that overlapped an invalidation (drop, rename, create, admin) is
answered but not stored, since it may describe the old table. `metadata_ttl_s = 0` turns the
storing off (loads are still shared while they overlap).
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import Any

from cachetools import TTLCache

from gateway.cache.table_index import TableIndex, TableMatch
from gateway.clock import Clock
from gateway.concurrency import SingleFlight, Spawn
from gateway.errors import UpstreamTimeoutError
from gateway.models import CacheKey, GenericTable


class MetadataCache:
    """Table metadata by `CacheKey` (TTL and LRU bounded).

    Args:
        ttl_s: how long a load is reused (0: not stored).
        max_entries: bound on stored loads.
        clock: the TTL runs on its monotonic time.
        spawn: owner of the shared loads.
        generation: the credential cache's invalidation counter (a load started before an
            invalidation is not stored).
        wait_s: how long one caller waits for a shared load.
    """

    def __init__(self, *, ttl_s: float, max_entries: int, clock: Clock, spawn: Spawn,
                 generation: Callable[[], int], wait_s: float) -> None:
        self._ttl_s = ttl_s
        self._generation = generation
        self._wait_s = wait_s
        self._flight: SingleFlight[CacheKey, GenericTable] = SingleFlight(spawn)
        # The keys with a load started (until it ends), so an invalidation can detach it.
        self._loading: dict[CacheKey, object] = {}
        self._tables: TTLCache[CacheKey, GenericTable] = TTLCache(
            maxsize=max_entries, ttl=max(ttl_s, 1e-9), timer=clock.monotonic,
        )
        self._by_table = TableIndex(self._tables)  # an event costs O(its table's keys)

    def __len__(self) -> int:
        return len(self._tables)

    async def get(self, key: CacheKey,
                  load: Callable[[], Coroutine[Any, Any, GenericTable]]) -> GenericTable:
        """The stored metadata for `key`, or the result of one shared `load()`.

        Raises:
            UpstreamTimeoutError: the shared load did not answer within `wait_s`.
            GatewayError: as `load()` raises.
        """
        if self._ttl_s > 0:
            cached: GenericTable | None = self._tables.get(key)
            if cached is not None:
                return cached
        gen = self._generation()
        mark = object()

        async def fetch() -> GenericTable:
            try:
                table = await load()
            finally:
                if self._loading.get(key) is mark:
                    del self._loading[key]
            if self._ttl_s > 0 and self._generation() == gen:
                self._tables[key] = table
                self._by_table.add(key)
            return table

        if not self._flight.running(key):
            self._loading[key] = mark  # this call starts the load (checked as run() does)

        try:
            # Each waiter keeps its own deadline; the shared load goes on for the others.
            result, _ = await self._flight.run(key, fetch, timeout_s=self._wait_s)
        except TimeoutError as exc:
            raise UpstreamTimeoutError("catalog did not answer within the deadline") from exc
        return result

    def invalidate_table(self, warehouse_id: str, namespace: tuple[str, ...],
                         table: str) -> int:
        """Drop every stored load of one table (O(its keys)) and its loads in flight;
        returns how many were stored."""
        keys = self._by_table.keys_of(TableMatch.of(warehouse_id, namespace, table))
        for key in keys:
            self._tables.pop(key, None)
        # Its loads in flight too: a caller after the invalidation never joins one from before.
        for k in [k for k in self._loading if k.same_table(warehouse_id, namespace, table)]:
            del self._loading[k]
            self._flight.forget(k)
        return len(keys)

    def clear(self) -> int:
        """Drop everything; returns how many entries there were."""
        n = len(self._tables)
        for k in list(self._loading):
            self._flight.forget(k)
        self._loading.clear()
        self._tables.clear()
        return n
