"""The per-process credential memo: a task asking again in a tight loop never leaves the process."""

from __future__ import annotations

import threading
from collections import OrderedDict

from lakegate_client._clock import Clock
from lakegate_client._models import Access, TableRef
from lakegate_client.credentials import TableCredentials

__all__ = ["CredentialMemo", "MemoKey", "memo_key"]

MemoKey = tuple[str, str, tuple[str, ...], str, str, str]


def memo_key(url: str, ref: TableRef, access: Access) -> MemoKey:
    """(url, warehouse, namespace, table, access, kind), case-folded as Lakekeeper matches names."""
    return (
        url,
        ref.warehouse.casefold(),
        tuple(p.casefold() for p in ref.namespace),
        ref.name.casefold(),
        access,
        ref.kind,
    )


class CredentialMemo:
    """Per-process memo of credentials, so a task asking in a tight loop never leaves the process.

    An entry is served only while it has more than ``floor_s`` left (the same floor the gateway
    serves with, so a memo hit is as good as a gateway answer); a credential without an expiry is
    never memoised (the gateway holds those only briefly). The remaining lifetime is fixed when an
    entry is stored (the smaller of the gateway's reported ``remaining_s`` and the expiry against
    the local wall clock) and then counted down on the monotonic clock, so a wall-clock step in
    this process can neither serve an expired credential nor discard a valid one. Bounded LRU.
    Thread-safe; the owner builds a new memo after a fork, so no lock is ever inherited held.
    """

    def __init__(self, clock: Clock, floor_s: float, max_entries: int) -> None:
        self._clock = clock
        self._floor_s = floor_s
        self._max_entries = max_entries
        self._entries: OrderedDict[MemoKey, tuple[TableCredentials, float]] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: MemoKey) -> TableCredentials | None:
        """A still-comfortable credential for ``key``, else None (and the stale entry dropped)."""
        with self._lock:
            entry = self._entries.get(key)
            if entry is None:
                return None
            creds, deadline = entry
            if deadline - self._clock.monotonic() <= self._floor_s:
                del self._entries[key]
                return None
            self._entries.move_to_end(key)
            return creds

    def put(self, key: MemoKey, creds: TableCredentials) -> None:
        """Remember ``creds`` if it is worth remembering."""
        remaining = creds.remaining_at(self._clock.now())
        if remaining is None:
            return
        if creds.served_remaining_s is not None:
            remaining = min(remaining, creds.served_remaining_s)
        if remaining <= self._floor_s:
            return
        deadline = self._clock.monotonic() + remaining
        with self._lock:
            self._entries[key] = (creds, deadline)
            self._entries.move_to_end(key)
            while len(self._entries) > self._max_entries:
                self._entries.popitem(last=False)

    def forget_table(self, url: str, ref: TableRef) -> None:
        access: Access
        """Drop both access modes of a table (after drop/rename through this client)."""
        with self._lock:
            for access in ("read", "write"):
                self._entries.pop(memo_key(url, ref, access), None)

    def clear(self) -> None:
        """Forget everything."""
        with self._lock:
            self._entries.clear()

    def __len__(self) -> int:
        return len(self._entries)
