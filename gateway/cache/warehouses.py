"""Warehouse name → id resolution: cached, single-flight, remembered for invalidation.

Stale-if-error: a name whose TTL lapsed keeps its last known id. One shared lookup refreshes
it; a caller waits for that only briefly (`stale_wait_s`) and is answered with the last known
id if the catalog fails or is slow, so a catalog outage never makes a request wait the whole
upstream deadline for (or fail on) a name it could already resolve. The stale id is then
trusted for `stale_retry_s` before the next attempt. Only a deterministic 404 drops it.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Coroutine
from typing import Any

from cachetools import LRUCache, TTLCache

from gateway.clock import Clock
from gateway.concurrency import SingleFlight, Spawn
from gateway.errors import GatewayError, NotFoundError, UpstreamTimeoutError
from gateway.models import RequestContext, Warehouse
from gateway.names import fold, is_uuid
from gateway.tuning import WAREHOUSE_KNOWN_MAX, WAREHOUSE_STALE_RETRY_S, WAREHOUSE_STALE_WAIT_S
from gateway.upstream.lakekeeper import CatalogClient


class WarehouseResolver:
    """Name or UUID → Warehouse, through `GET /catalog/v1/config?warehouse=` when needed.

    Args:
        catalog: the upstream client.
        clock: time source (the TTL cache runs on monotonic time).
        spawn: owner of the shared lookups.
        ttl_s: how long a resolution is trusted (the wiring caps it at the identity TTL
            without events: Lakekeeper announces no warehouse rename or delete, so a name
            reused for another warehouse is noticed only by resolving it again).
        wait_s: how long one caller waits for a shared lookup.
        negative_ttl_s: how long an unknown name is remembered (0: not at all).
        stale_retry_s: while a lapsed mapping is served stale, how often a refresh is tried.
        stale_wait_s: how long a caller with a lapsed mapping waits for its refresh.
    """

    def __init__(self, catalog: CatalogClient, clock: Clock, spawn: Spawn, *, ttl_s: float,
                 wait_s: float, negative_ttl_s: float = 0.0,
                 stale_retry_s: float = WAREHOUSE_STALE_RETRY_S,
                 stale_wait_s: float = WAREHOUSE_STALE_WAIT_S) -> None:
        self._catalog = catalog
        self._wait_s = wait_s
        # Unknown names are remembered briefly, so random names cannot hammer /config.
        self._missing: TTLCache[str, NotFoundError] | None = (
            TTLCache(maxsize=WAREHOUSE_KNOWN_MAX, ttl=negative_ttl_s, timer=clock.monotonic)
            if negative_ttl_s > 0 else None
        )
        # Resolutions trusted for ttl_s: key → (warehouse, monotonic deadline), LRU-bounded.
        # A plain OrderedDict rather than cachetools: `peek` runs on every credential request.
        # Measured (timeit, 1,024 entries, one hit): OrderedDict 144 ns, cachetools LRUCache
        # plus the deadline check 316 ns, TLRUCache (per-entry deadlines) 1,087 ns.
        self._clock = clock
        self._ttl_s = max(ttl_s, 1e-9)
        self._stale_retry_s = max(min(stale_retry_s, self._ttl_s), 1e-9)
        self._stale_wait_s = min(stale_wait_s, wait_s)
        self._cache: OrderedDict[str, tuple[Warehouse, float]] = OrderedDict()
        # Names seen ever (bounded), so a sync invalidate() can map a name to its id even
        # after the TTL cache expired while credential entries live on.
        self._known: LRUCache[str, Warehouse] = LRUCache(WAREHOUSE_KNOWN_MAX)
        self._flight: SingleFlight[str, Warehouse] = SingleFlight(spawn)

    def remember(self, project: str, query: str, wh: Warehouse, *, learn: bool = True) -> None:
        """Record a resolution under the query, the name and the id (`learn`: also among the
        names known for good; not for a bare UUID, which teaches nothing and would push
        learned names out)."""
        deadline = self._clock.monotonic() + self._ttl_s
        for k in {f"{project}|{fold(query)}", f"{project}|{fold(wh.name)}",
                  f"{project}|{wh.id.lower()}"}:
            self._cache[k] = (wh, deadline)
            self._cache.move_to_end(k)
            if learn:
                self._known[k] = wh
        while len(self._cache) > WAREHOUSE_KNOWN_MAX:
            self._cache.popitem(last=False)

    async def _refresh_or_stale(self, ck: str, stale: Warehouse,
                                fetch: Callable[[], Coroutine[Any, Any, Warehouse]]
                                ) -> Warehouse:
        """A fresh resolution if the catalog answers within `stale_wait_s`, else `stale`.

        A flight already running (started by an earlier caller that gave up on it) is not
        waited for again. The shared lookup goes on in the background either way.
        """
        if ck in self._flight:
            self._flight.start(ck, fetch)  # joins it: nobody waits for it again
        else:
            try:
                fresh, _ = await self._flight.run(ck, fetch, timeout_s=self._stale_wait_s)
                return fresh
            except NotFoundError:
                raise
            except (GatewayError, TimeoutError):
                pass
        # Trust the last known id until the next attempt: callers meanwhile need no I/O.
        self._cache[ck] = (stale, self._clock.monotonic() + self._stale_retry_s)
        self._cache.move_to_end(ck)
        return stale

    def _forget(self, ck: str) -> None:
        """Drop the mapping under `ck` (fresh and last known)."""
        self._cache.pop(ck, None)
        self._known.pop(ck, None)

    @staticmethod
    def cache_key(warehouse: str, project: str) -> str:
        """The key `resolve` caches a resolution under (for `peek`)."""
        return f"{project}|{fold(warehouse)}"

    def peek(self, ck: str) -> Warehouse | None:
        """The cached, unexpired resolution under `ck` (no I/O): what `resolve` would return
        without asking the catalog. The same Warehouse object until it is re-resolved."""
        hit = self._cache.get(ck)
        if hit is None:
            return None
        if self._clock.monotonic() < hit[1]:
            self._cache.move_to_end(ck)
            return hit[0]
        del self._cache[ck]
        return None

    def ids_for(self, warehouse: str) -> set[str]:
        """Every warehouse id known under this name or id (any project), without I/O."""
        ids = {warehouse.lower()} if is_uuid(warehouse) else set()
        folded = fold(warehouse)
        ids |= {wh.id for k, wh in self._known.items() if k.split("|", 1)[1] == folded}
        return ids

    async def resolve(self, warehouse: str, project: str, ctx: RequestContext) -> Warehouse:
        """Warehouse name or UUID → Warehouse (cached `ttl_s`, single-flight).

        A UUID is accepted as is (Lakekeeper's `{prefix}`); a name is resolved through
        `GET /catalog/v1/config?warehouse=<name>` (`defaults.prefix`).

        Raises:
            NotFoundError: unknown warehouse.
            UpstreamTimeoutError: the shared lookup did not answer within `wait_s`.
        """
        ck = self.cache_key(warehouse, project)
        hit = self.peek(ck)
        if hit is not None:
            return hit
        missing = self._missing.get(ck) if self._missing is not None else None
        if missing is not None:
            raise missing.clone()
        if is_uuid(warehouse):
            known = self._known.get(f"{project}|{warehouse.lower()}")
            wh = known or Warehouse(id=warehouse.lower(), name=warehouse.lower())
            self.remember(project, warehouse, wh, learn=known is not None)
            return wh

        async def fetch() -> Warehouse:
            try:
                wid = await self._catalog.resolve_warehouse_id(warehouse, ctx)
            except NotFoundError as err:
                # Deterministic: the name is gone, so its last known id must not be served.
                self._forget(ck)
                if self._missing is not None:
                    self._missing[ck] = err
                raise
            found = Warehouse(id=wid.lower(), name=warehouse)
            self.remember(project, warehouse, found)
            return found

        stale = self._known.get(ck)
        if stale is not None:
            return await self._refresh_or_stale(ck, stale, fetch)

        try:
            # Each waiter keeps its own deadline; the shared lookup goes on for the others.
            result, _ = await self._flight.run(ck, fetch, timeout_s=self._wait_s)
        except TimeoutError as exc:
            raise UpstreamTimeoutError("catalog did not answer within the deadline") from exc
        return result
