"""FetchTickets: which fetch of each credential key is current, so invalidations reach it.

Why a ticket per fetch and not a generation counter: an invalidation must detach exactly the
fetches of the keys it names, whether or not those keys have an entry yet (a first miss in
flight), and nothing else (one global counter made a create anywhere discard every fetch in
flight). A ticket is registered when its flight is created, before its task runs, so an
invalidation in between already reaches it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from gateway.models import CacheKey


@dataclass(eq=False)
class Ticket:
    """One fetch's standing.

    `discarded`: an invalidation of its key detached it; its answer reaches the callers
    already waiting and nothing else (neither stored nor negative-cached).
    `wanted`: a caller waits for it; a background refresh nobody waits for only replaces an
    entry, it never creates one (the key may have been evicted while it ran).
    """

    wanted: bool
    discarded: bool = False


class FetchTickets:
    """The ticket of the attached fetch of each key (one per key: fetches are single-flight).

    Args:
        forget: detaches the key's flight (SingleFlight.forget), so later callers start anew.
    """

    def __init__(self, forget: Callable[[CacheKey], None]) -> None:
        self._forget = forget
        self._current: dict[CacheKey, Ticket] = {}

    def __len__(self) -> int:
        return len(self._current)

    def keys(self) -> list[CacheKey]:
        return list(self._current)

    def issue(self, key: CacheKey, *, wanted: bool) -> Ticket:
        """The ticket of a new fetch of `key` (called as its flight is created)."""
        ticket = self._current[key] = Ticket(wanted=wanted)
        return ticket

    def want(self, key: CacheKey) -> None:
        """A caller is about to wait for the fetch of `key` in flight, if there is one."""
        ticket = self._current.get(key)
        if ticket is not None:
            ticket.wanted = True

    def done(self, key: CacheKey, ticket: Ticket) -> None:
        """The fetch holding `ticket` finished (a newer one may already be current)."""
        if self._current.get(key) is ticket:
            del self._current[key]

    def detach(self, key: CacheKey) -> None:
        """Discard the fetch of `key` in flight, if any, and detach its flight."""
        ticket = self._current.pop(key, None)
        if ticket is not None:
            ticket.discarded = True
        self._forget(key)

    def detach_where(self, match: Callable[[CacheKey], bool]) -> None:
        """`detach` every key in flight that `match`es."""
        for key in [k for k in self._current if match(k)]:
            self.detach(key)
