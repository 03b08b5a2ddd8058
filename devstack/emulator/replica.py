"""ReplicaLag: reads that lag writes by a bounded time, as from a catalog's read replica.

Lakekeeper serves loads and vends credentials from its read pool (`PG_DATABASE_URL_READ`), which
its docs recommend pointing at a replica, and publishes its change events after committing on
the primary: a reader told of a change at once may still read the old table. With the fault
`replica_lag_ms`, a table read through the "replica" (loads, credentials, exists) answers what
the name held `replica_lag_ms` ago (a dropped table still answers, a new one is 404 yet);
writes and their checks always see the primary. History is kept only while the fault is on,
per name, and pruned past the lag.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

# (kind, namespace id, folded name)
NameKey = tuple[str, str, str]


class ReplicaLag:
    """What each table name held before its recent writes, to answer reads as of `lag_s` ago.

    Args:
        clock: monotonic seconds.
    """

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._lag_s = 0.0
        self._history: dict[NameKey, list[tuple[float, Any]]] = {}

    @property
    def lag_s(self) -> float:
        return self._lag_s

    def set_lag(self, lag_s: float) -> None:
        self._lag_s = lag_s
        if lag_s <= 0:
            self._history.clear()

    @staticmethod
    def key(kind: str, namespace_id: str, name: str) -> NameKey:
        return (kind, namespace_id, name.casefold())

    def wrote(self, key: NameKey, previous: Any) -> None:
        """A write of `key` on the primary; `previous` is what the name held before (None:
        nothing)."""
        if self._lag_s <= 0:
            return
        self._history.setdefault(key, []).append((self._clock(), previous))

    def read(self, key: NameKey, current: Any) -> Any:
        """What a replica answers for `key`: the name's state `lag_s` ago (the `previous` of
        the first write since then), else `current`."""
        if self._lag_s <= 0:
            return current
        writes = self._history.get(key)
        if not writes:
            return current
        horizon = self._clock() - self._lag_s
        while writes and writes[0][0] <= horizon:
            writes.pop(0)
        if not writes:
            del self._history[key]
            return current
        return writes[0][1]
