"""A small bounded LRU for the HTTP hot path (parsed routes and targets).

cachetools' LRUCache is a Python-level MutableMapping with per-call bookkeeping; the hot path
needs one `get` per request, so this is an OrderedDict with `move_to_end` and nothing else. Only
pure results (a function of the key alone) go in, so entries never need invalidating: the bound
is what keeps a flood of distinct paths from growing memory.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Generic, TypeVar

K = TypeVar("K")
V = TypeVar("V")


class BoundedLru(Generic[K, V]):
    """At most `maxsize` entries; the least recently used one is dropped first."""

    __slots__ = ("_data", "maxsize")

    def __init__(self, maxsize: int) -> None:
        if maxsize < 1:
            raise ValueError("maxsize must be at least 1")
        self.maxsize = maxsize
        self._data: OrderedDict[K, V] = OrderedDict()

    def get(self, key: K) -> V | None:
        value = self._data.get(key)
        if value is not None:
            self._data.move_to_end(key)
        return value

    def put(self, key: K, value: V) -> None:
        data = self._data
        data[key] = value
        data.move_to_end(key)
        while len(data) > self.maxsize:
            data.popitem(last=False)

    def clear(self) -> None:
        self._data.clear()

    def __len__(self) -> int:
        return len(self._data)

    def __contains__(self, key: object) -> bool:
        return key in self._data
