"""BoundedLru: the route/decision memo of the HTTP hot path stays bounded and drops LRU first."""

from __future__ import annotations

import pytest

from gateway.surfaces.memo import BoundedLru


def test_holds_at_most_maxsize_entries() -> None:
    lru: BoundedLru[int, str] = BoundedLru(3)
    for i in range(10):
        lru.put(i, str(i))
    assert len(lru) == 3
    assert [lru.get(i) for i in range(10)] == [None] * 7 + ["7", "8", "9"]


def test_a_read_entry_survives_eviction_and_the_least_recently_used_goes() -> None:
    lru: BoundedLru[str, int] = BoundedLru(2)
    lru.put("a", 1)
    lru.put("b", 2)
    assert lru.get("a") == 1
    lru.put("c", 3)
    assert "b" not in lru
    assert lru.get("a") == 1
    assert lru.get("c") == 3


def test_put_replaces_and_clear_empties() -> None:
    lru: BoundedLru[str, int] = BoundedLru(2)
    lru.put("a", 1)
    lru.put("a", 2)
    assert len(lru) == 1
    assert lru.get("a") == 2
    lru.clear()
    assert lru.get("a") is None


def test_a_zero_bound_is_refused() -> None:
    with pytest.raises(ValueError, match="maxsize"):
        BoundedLru(0)
