"""CredentialKeys: (table, access, project, delegation) → (warehouse, credential cache key).

Every credential request derives its cache key the same way: resolve the warehouse (a cached
name → id mapping), then build the `CacheKey`. The pair is memoized per request shape, LRU-bounded
(`KEY_MEMO_MAX`), and a memo is used only while the resolver still holds the very same
resolution (checked by identity on every use), so a re-resolution, `remember()` or expiry takes
effect on the next request and the answer always equals the unmemoized path's.

The memo is an OrderedDict, not cachetools' LRUCache, because every credential request reads
it: measured in process (FakeCatalog, uvloop, one warm key), `get_credentials` took 2.5 µs a
hit with the OrderedDict and 3.0 µs with LRUCache (whose get hashes the TableRef key three
times).
"""

from __future__ import annotations

from collections import OrderedDict

from gateway.cache.warehouses import WarehouseResolver
from gateway.models import AccessMode, CacheKey, RequestContext, TableRef, Warehouse
from gateway.tuning import KEY_MEMO_MAX

MemoKey = tuple[TableRef, AccessMode, str, str | None]


def cache_key(project: str, wh: Warehouse, ref: TableRef, access: AccessMode,
              delegation: str | None) -> CacheKey:
    """The credential cache key of one table for one access mode and delegation."""
    return CacheKey.of(project=project, warehouse_id=wh.id, namespace=ref.namespace,
                       table=ref.name, access=access, delegation=delegation, kind=ref.kind)


class CredentialKeys:
    """Derives (and memoizes) the credential cache key of a request.

    Args:
        warehouses: the resolver whose resolutions the memo follows.
        maxsize: memo bound (default `KEY_MEMO_MAX`).
    """

    def __init__(self, warehouses: WarehouseResolver, maxsize: int | None = None) -> None:
        self._warehouses = warehouses
        self._maxsize = maxsize or KEY_MEMO_MAX
        # Hand-rolled, not cachetools: see the module docstring for the numbers.
        self._memo: OrderedDict[MemoKey, tuple[str, Warehouse, CacheKey]] = OrderedDict()
        # One CacheKey object per key (same bound): the cache and the identity guard keep the
        # key object of the request that filled them, and a dict finds its own key object by
        # identity, without comparing fields, on every cached answer.
        self._keys: OrderedDict[CacheKey, CacheKey] = OrderedDict()

    def __len__(self) -> int:
        return len(self._memo)

    def _interned(self, key: CacheKey) -> CacheKey:
        """The CacheKey object already handed out for `key`'s value, else `key` itself."""
        keys = self._keys
        known = keys.get(key)
        if known is not None:
            keys.move_to_end(known)
            return known
        keys[key] = key
        if len(keys) > self._maxsize:
            keys.popitem(last=False)
        return key

    def peek(self, ref: TableRef, access: AccessMode, project: str,
             delegation: str | None) -> tuple[Warehouse, CacheKey] | None:
        """`resolve` without a coroutine when it is remembered and its warehouse still cached
        (the hot path), else None."""
        mk: MemoKey = (ref, access, project, delegation)
        memo = self._memo.get(mk)
        if memo is not None and self._warehouses.peek(memo[0]) is memo[1]:
            self._memo.move_to_end(mk)
            return memo[1], memo[2]
        return None

    async def resolve(self, ref: TableRef, access: AccessMode, project: str,
                      ctx: RequestContext) -> tuple[Warehouse, CacheKey]:
        """The warehouse of `ref` and the cache key of the request.

        Raises:
            NotFoundError, UpstreamTimeoutError: as `WarehouseResolver.resolve`.
        """
        hit = self.peek(ref, access, project, ctx.delegation)
        if hit is not None:
            return hit
        wh = await self._warehouses.resolve(ref.warehouse, project, ctx)
        key = self._interned(cache_key(project, wh, ref, access, ctx.delegation))
        ck = self._warehouses.cache_key(ref.warehouse, project)
        if self._warehouses.peek(ck) is wh:
            mk: MemoKey = (ref, access, project, ctx.delegation)
            self._memo[mk] = (ck, wh, key)
            self._memo.move_to_end(mk)
            if len(self._memo) > self._maxsize:
                self._memo.popitem(last=False)
        return wh, key
