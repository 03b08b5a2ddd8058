"""NegativeCache: deterministic catalog answers remembered per key for a few seconds.

A 404, a 403 or a credential vended below the serve floor will not change on a retry a moment
later, so the next callers get the same error without asking the catalog again
(`CACHE__NEGATIVE_TTL_S`, chosen by `policy.negative_ttl`). Read only while it holds anything:
the hit path pays one truth test.
"""

from __future__ import annotations

from cachetools import LRUCache

from gateway.cache.table_index import TableIndex, TableMatch
from gateway.errors import GatewayError
from gateway.models import CacheKey


class NegativeCache:
    """Errors per key with a monotonic deadline, LRU-bounded like the entries."""

    def __init__(self, max_entries: int) -> None:
        self._errors: LRUCache[CacheKey, tuple[GatewayError, float]] = LRUCache(max_entries)
        self._by_table = TableIndex(self._errors)

    def check(self, key: CacheKey, now_mono: float) -> None:
        """Raise a copy of the error remembered for `key`, until its deadline."""
        if not self._errors:
            return
        hit = self._errors.get(key)
        if hit is None:
            return
        if now_mono < hit[1]:
            raise hit[0].clone()
        del self._errors[key]

    def remember(self, key: CacheKey, err: GatewayError, until_mono: float) -> None:
        self._errors[key] = (err, until_mono)
        self._by_table.add(key)

    def forget(self, key: CacheKey) -> None:
        self._errors.pop(key, None)

    def forget_table(self, table: TableMatch) -> None:
        """Forget every key of one table (O(its keys))."""
        for key in self._by_table.keys_of(table):
            del self._errors[key]

    def clear(self) -> None:
        self._errors.clear()

    def keys(self) -> list[CacheKey]:
        return list(self._errors)
