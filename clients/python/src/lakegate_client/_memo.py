"""The per-process credential memo: a task asking again in a tight loop never leaves the process."""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import NamedTuple

from lakegate_client._clock import Clock
from lakegate_client._models import Access, TableRef
from lakegate_client.credentials import TableCredentials

__all__ = ["DEFAULT_IDENTITY_TTL_S", "CredentialMemo", "MemoKey", "memo_key"]

MemoKey = tuple[str, str, tuple[str, ...], str, str, str]

# How long an answer's table identity is used when the gateway does not say (a gateway older
# than `identity_ttl_s`): short, so the memo adds at most this to that gateway's own bound.
DEFAULT_IDENTITY_TTL_S = 5.0


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


class _Entry(NamedTuple):
    creds: TableCredentials
    deadline: float  # monotonic: the credential's expiry
    identity_deadline: float  # monotonic: the gateway's word on the table identity lapses


class CredentialMemo:
    """Per-process memo of credentials, so a task asking in a tight loop never leaves the process.

    An entry is served only while it has more than ``floor_s`` left (the same floor the gateway
    serves with, so a memo hit is as good as a gateway answer), and only while the gateway's
    word on its table identity holds: ``identity_ttl_s`` of the answer, counted from when the
    request was sent (``DEFAULT_IDENTITY_TTL_S`` when the gateway does not say). After that the
    gateway is asked again (cheap: it keeps the identity confirmed), so a table replaced through
    another node is never served from here longer than the gateway itself would serve it. An
    entry whose identity lapsed stays available to :meth:`unconfirmed`, for when the gateway
    cannot be reached at all.

    A credential without an expiry is never memoised (the gateway holds those only briefly). The
    remaining lifetime is fixed when an entry is stored (the smaller of the gateway's reported
    ``remaining_s`` and the expiry against the local wall clock) and then counted down on the
    monotonic clock, so a wall-clock step in this process can neither serve an expired
    credential nor discard a valid one. Bounded LRU. Thread-safe; the owner builds a new memo
    after a fork, so no lock is ever inherited held.
    """

    def __init__(self, clock: Clock, floor_s: float, max_entries: int) -> None:
        self._clock = clock
        self._floor_s = floor_s
        self._max_entries = max_entries
        self._entries: OrderedDict[MemoKey, _Entry] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: MemoKey) -> TableCredentials | None:
        """A still-comfortable credential for ``key`` whose identity the gateway vouches for."""
        return self._lookup(key, confirmed=True)

    def unconfirmed(self, key: MemoKey) -> TableCredentials | None:
        """A still-comfortable credential for ``key`` whatever its identity's age (the gateway
        cannot be reached: what the gateway itself serves while its catalog cannot be)."""
        return self._lookup(key, confirmed=False)

    def _lookup(self, key: MemoKey, *, confirmed: bool) -> TableCredentials | None:
        now = self._clock.monotonic()
        with self._lock:
            entry = self._entries.get(key)
            if entry is None:
                return None
            if entry.deadline - now <= self._floor_s:
                del self._entries[key]
                return None
            if confirmed and now >= entry.identity_deadline:
                return None
            self._entries.move_to_end(key)
            return entry.creds

    def put(self, key: MemoKey, creds: TableCredentials, asked_mono: float | None = None) -> None:
        """Remember ``creds`` if it is worth remembering; ``asked_mono`` is the monotonic time
        the request was sent (default now), from which the gateway's identity TTL counts."""
        remaining = creds.remaining_at(self._clock.now())
        if remaining is None:
            return
        if creds.served_remaining_s is not None:
            remaining = min(remaining, creds.served_remaining_s)
        if remaining <= self._floor_s:
            return
        now = self._clock.monotonic()
        identity_ttl = creds.identity_ttl_s
        if identity_ttl is None:
            identity_ttl = DEFAULT_IDENTITY_TTL_S
        asked = now if asked_mono is None else min(asked_mono, now)
        entry = _Entry(creds, now + remaining, asked + max(0.0, identity_ttl))
        with self._lock:
            self._entries[key] = entry
            self._entries.move_to_end(key)
            while len(self._entries) > self._max_entries:
                self._entries.popitem(last=False)

    def forget_table(self, url: str, ref: TableRef) -> None:
        """Drop both access modes of a table (after drop/rename through this client)."""
        access: Access
        with self._lock:
            for access in ("read", "write"):
                self._entries.pop(memo_key(url, ref, access), None)

    def clear(self) -> None:
        """Forget everything."""
        with self._lock:
            self._entries.clear()

    def __len__(self) -> int:
        return len(self._entries)
