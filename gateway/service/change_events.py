"""ChangeEvents: what a catalog change event does to this gateway's caches.

Every table name an event names (the changed table's; for a rename also the destination) loses
its cached credential and metadata entries at once, on every access mode, so the next request
fetches the table the catalog has now (commits and views name none: upstream/events.py).
Events are only a speed-up: applying one twice, late or out of order only causes one more fetch,
never a wrong answer (an answer always comes from a fetch, and a fetch started before an
invalidation is not stored), and a lost one is bounded by the identity TTL. While the
subscription is up the guard's TTL is `events.identity_ttl_s`; when it is lost it drops to
`cache.identity_ttl_s` at once, for every entry already confirmed.

An event costs O(its tables) (the caches index their keys by table), and one table's events
are rate-limited (`events.table_events_per_s`, burst `table_event_burst`). An event that is
known lost (dropped by the limit or by the NATS client because the consumer fell behind, over
the size limit, or malformed though typed as an identity change) is treated as a lost
subscription: the short TTL applies to every entry until `cache.identity_ttl_s` has passed
since the last loss (by then every entry confirmed before it was confirmed again: the events
are resynchronised), and `up` is false meanwhile. A reconnect after a gap is such a loss, ending
when the subscription is back: the short TTL applies for `cache.identity_ttl_s` plus the
upstream deadline from then, so an identity load or a credential fetch that was in flight
across the gap (it read the catalog before events it never saw) is never trusted for the events
TTL (docs/contracts.md, "subscription lost").
"""

from __future__ import annotations

import logging
from collections import OrderedDict

from gateway.cache.identity import IdentityGuard
from gateway.cache.table_index import TableId, TableMatch
from gateway.clock import Clock
from gateway.concurrency import Spawn
from gateway.metrics import Metrics
from gateway.service.gateway_service import GatewayService
from gateway.settings import Settings
from gateway.tuning import EVENT_RATE_TABLES_MAX
from gateway.upstream.events import ChangeEvent

log = logging.getLogger(__name__)


class TableEventLimiter:
    """A token bucket per table (LRU-bounded: `EVENT_RATE_TABLES_MAX` tables)."""

    def __init__(self, rate_per_s: float, burst: int, clock: Clock,
                 max_tables: int = EVENT_RATE_TABLES_MAX) -> None:
        self._rate = rate_per_s
        self._burst = float(burst)
        self._clock = clock
        self._max = max_tables
        self._buckets: OrderedDict[TableId, tuple[float, float]] = OrderedDict()

    def __len__(self) -> int:
        return len(self._buckets)

    def allow(self, table: TableId) -> bool:
        """Take one token of `table`'s bucket; False when it is empty."""
        now_m = self._clock.monotonic()
        tokens, at = self._buckets.pop(table, (self._burst, now_m))
        tokens = min(self._burst, tokens + (now_m - at) * self._rate)
        allowed = tokens >= 1.0
        self._buckets[table] = (tokens - 1.0 if allowed else tokens, now_m)
        if len(self._buckets) > self._max:
            self._buckets.popitem(last=False)
        return allowed


class ChangeEvents:
    """Applies change events; tracks the subscription and lost events for readiness and the
    guard's TTL (implements upstream.events.EventSink)."""

    def __init__(self, service: GatewayService, guard: IdentityGuard, settings: Settings,
                 metrics: Metrics, clock: Clock, spawn: Spawn) -> None:
        self._service = service
        self._guard = guard
        self._settings = settings
        self._metrics = metrics
        self._clock = clock
        self._spawn = spawn
        self._limiter = TableEventLimiter(settings.events.table_events_per_s,
                                          settings.events.table_event_burst, clock)
        self._subscribed = False
        self._gap = False  # the subscription was up and is down now
        # After a gap, the short TTL holds until every read in flight when it ended is bounded:
        # the short TTL plus the longest a shared upstream call may still take.
        self._gap_window_s = settings.cache.identity_ttl_s + settings.upstream.deadline_s + 1.0
        self._resync_mono: float | None = None  # lost events: short TTL until then
        self._resyncing = False
        self.up = False
        service.events_detail = self.detail  # readiness names a lost subscription
        metrics.change_events_configured.set(1)
        metrics.change_events_up.set(0)

    def apply(self, event: ChangeEvent) -> None:
        if not event.names:  # a commit or a view: no table identity changed
            self._metrics.change_events.labels("ignored").inc()
            return
        tables = [TableMatch.of(event.warehouse_id, ns, name).id for ns, name in event.names]
        if not all([self._limiter.allow(table) for table in tables]):  # each takes a token
            self.rejected("rate_limited", lossy=True)
            return
        removed = self._service.apply_change(event)
        self._metrics.change_events.labels("applied").inc()
        log.debug("change event applied", extra={"event_type": event.type, "removed": removed})

    def rejected(self, result: str, *, lossy: bool) -> None:
        """A message not applied (`malformed`, `refused`, `rate_limited`, `dropped`); a lossy
        one may have named a table: the short TTL applies until resynchronised."""
        self._metrics.change_events.labels(result).inc()
        if lossy:
            self._lost()

    def state(self, up: bool) -> None:
        """The subscription is up or down. A reconnect after a gap is a loss that ends now:
        events published during the gap are lost, and an identity load or credential fetch in
        flight across it read the catalog before the gap ended, so nothing gets the events TTL
        again until the gap window has passed (the first subscription is no gap: nothing was
        trusted for the events TTL before it)."""
        if not up and self._subscribed:
            self._gap = True
        self._subscribed = up
        if up and self._gap:
            self._gap = False
            self._lost(self._gap_window_s)
        self._publish()

    def _lost(self, window_s: float | None = None) -> None:
        first = self._resync_mono is None
        until = self._clock.monotonic() + (
            self._settings.cache.identity_ttl_s if window_s is None else window_s)
        self._resync_mono = max(until, self._resync_mono or until)
        if first:
            log.warning("change events lost; identity TTL without events applies until "
                        "resynchronised")
            self._publish()
        if not self._resyncing:
            self._resyncing = True
            self._spawn(self._resync())

    async def _resync(self) -> None:
        """Wait until `cache.identity_ttl_s` has passed since the last lost event (the gap
        window since the end of the last gap)."""
        try:
            while self._resync_mono is not None:
                left = self._resync_mono - self._clock.monotonic()
                if left <= 0:
                    self._resync_mono = None
                    log.info("change events resynchronised")
                    self._publish()
                    break
                await self._clock.sleep(left)
        finally:
            self._resyncing = False

    def _publish(self) -> None:
        """`up` (subscribed and no recent loss) to the metric and the guard's TTL."""
        self.up = self._subscribed and self._resync_mono is None
        self._metrics.change_events_up.set(1 if self.up else 0)
        self._guard.set_ttl(self._settings.events.identity_ttl_s if self.up
                            else self._settings.cache.identity_ttl_s)

    def detail(self) -> str | None:
        """The readiness detail while the subscription is lost (requests go on)."""
        if self.up:
            return None
        what = ("change events lost, resynchronising" if self._subscribed
                else "change events subscription lost")
        return (f"{what}; staleness bounded by "
                f"cache.identity_ttl_s={self._settings.cache.identity_ttl_s:g}s")
