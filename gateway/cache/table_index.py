"""TableIndex: a cache's keys by table, so dropping one table costs O(its keys), not O(cache).

Why: a catalog change event names a table, and finding its keys by scanning every cached key
(folding each key's names again) made one event cost O(cache): with 2,000 cached keys about
236 small events a second saturated the event loop. The index is told only when its container
adds a key (one hook); removals (drops, LRU, TTL expiry) are not reported, so a lookup keeps
only the keys the container still holds, and the index is rebuilt from the container once it
holds more than twice the live keys (amortized O(1) per add, bounded memory).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from gateway.models import CacheKey
from gateway.names import fold_namespace, fold_table

TableId = tuple[str, tuple[str, ...], str]
# Rebuild slack: a small container is not rebuilt on every other add.
REBUILD_SLACK = 64


@dataclass(frozen=True)
class TableMatch:
    """One table in the keys' comparison form, folded once (`CacheKey.same_table` folds the
    given names again for every key it is asked about)."""

    warehouse_id: str
    namespace: tuple[str, ...]
    plain: str  # a generic table's (and a Delta or Lance table's) folded name
    iceberg: str  # an Iceberg table's: Lakekeeper reads `+` as a space

    @classmethod
    def of(cls, warehouse_id: str, namespace: tuple[str, ...], table: str) -> TableMatch:
        return cls(warehouse_id=warehouse_id.lower(), namespace=fold_namespace(namespace),
                   plain=fold_table(table, plus_is_space=False),
                   iceberg=fold_table(table, plus_is_space=True))

    def __call__(self, key: CacheKey) -> bool:
        """Whether `key` belongs to this table (any access, delegation or project)."""
        return (key.warehouse_id == self.warehouse_id and key.namespace == self.namespace
                and key.table == (self.iceberg if key.kind == "iceberg" else self.plain))

    @property
    def id(self) -> TableId:
        """One id for the table (its generic spelling), e.g. to count its events."""
        return (self.warehouse_id, self.namespace, self.plain)

    def ids(self) -> set[TableId]:
        return {(self.warehouse_id, self.namespace, self.plain),
                (self.warehouse_id, self.namespace, self.iceberg)}


class TableIndex:
    """The keys of `container` by table (lazily validated against it).

    Args:
        container: the mapping whose keys are indexed (an entry dict, a TTLCache, an LRUCache);
            `add` is called after each key it gains.
    """

    def __init__(self, container: Mapping[CacheKey, Any]) -> None:
        self._container = container
        self._by_table: dict[TableId, set[CacheKey]] = {}
        self._size = 0

    def __len__(self) -> int:
        """Keys indexed, live or not yet pruned."""
        return self._size

    def add(self, key: CacheKey) -> None:
        keys = self._by_table.setdefault((key.warehouse_id, key.namespace, key.table), set())
        if key not in keys:
            keys.add(key)
            self._size += 1
            if self._size > 2 * len(self._container) + REBUILD_SLACK:
                self._rebuild()

    def keys_of(self, table: TableMatch) -> list[CacheKey]:
        """The keys of `table` the container still holds (pruning the ones it lost)."""
        out: list[CacheKey] = []
        for tid in table.ids():
            keys = self._by_table.get(tid)
            if keys is None:
                continue
            for key in list(keys):
                if key not in self._container:
                    keys.discard(key)
                    self._size -= 1
                elif table(key):
                    out.append(key)
            if not keys:
                del self._by_table[tid]
        return out

    def _rebuild(self) -> None:
        self._by_table = {}
        self._size = 0
        for key in list(self._container):
            self._by_table.setdefault((key.warehouse_id, key.namespace, key.table),
                                      set()).add(key)
            self._size += 1
