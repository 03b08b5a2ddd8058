"""Tables this gateway created itself, by the request id it sent the catalog.

Why: Lakekeeper's change event for a create carries that request id as `trace-id`. The gateway
already dropped the name's entries when its own create answered, so every credential cached
since was vended for the new table; the create's own event (arriving up to seconds later on
a loaded node) dropping them again only cost one more STS call per access mode. Only a
create is remembered: a drop's or a rename's own event is applied as any other.
"""

from __future__ import annotations

from collections import OrderedDict

from gateway.cache.table_index import TableId, TableMatch
from gateway.clock import Clock
from gateway.names import is_uuid


class OwnCreates:
    """Bounded and short-lived: an event older than `ttl_s`, or past `max_entries` creates, is
    applied as any other (one more vend at worst, never a stale answer)."""

    def __init__(self, clock: Clock, *, max_entries: int = 1024, ttl_s: float = 600.0) -> None:
        self._clock = clock
        self._max = max_entries
        self._ttl_s = ttl_s
        # per table, its latest create here: (request id, until monotonic)
        self._made: OrderedDict[TableId, tuple[str, float]] = OrderedDict()

    def record(self, request_id: str, warehouse_id: str, namespace: tuple[str, ...],
               table: str) -> None:
        """A create this gateway sent with `request_id` succeeded (the catalog makes a UUID
        request id the event's `trace-id`, any other a fresh one: nothing to remember)."""
        if not is_uuid(request_id):
            return
        key = TableMatch.of(warehouse_id, namespace, table).id
        self._made[key] = (request_id.lower(), self._clock.monotonic() + self._ttl_s)
        self._made.move_to_end(key)
        while len(self._made) > self._max:
            self._made.popitem(last=False)

    def take(self, event_type: str, trace_id: str, warehouse_id: str,
             namespace: tuple[str, ...], table: str) -> bool:
        """Whether this event is the echo of the generic table create recorded here for this
        name (forgotten once taken, whatever the answer)."""
        if event_type != "createGenericTable" or not self._made:
            return False
        made = self._made.pop(TableMatch.of(warehouse_id, namespace, table).id, None)
        return (made is not None and made[0] == trace_id.lower()
                and made[1] > self._clock.monotonic())

    def forget(self, warehouse_id: str, namespace: tuple[str, ...], table: str) -> None:
        """Another change named this table: a later event with a recorded id is not an echo."""
        if self._made:
            self._made.pop(TableMatch.of(warehouse_id, namespace, table).id, None)
