"""ChangeEvents: what a catalog change event does to this gateway's caches.

Every table name an event names (the changed table's; for a rename also the destination) loses
its cached credential and metadata entries at once, on every access mode, so the next request
fetches the table the catalog has now (commits and views name none: upstream/events.py).
Events are only a speed-up: applying one twice, late or out of order only causes one more fetch,
never a wrong answer (an answer always comes from a fetch, and a fetch started before an
invalidation is not stored), and a lost one is bounded by the identity TTL. While the
subscription is up the guard's TTL is `events.identity_ttl_s`; when it is lost it drops to
`cache.identity_ttl_s` at once, for every entry already confirmed.
"""

from __future__ import annotations

import logging

from gateway.cache.identity import IdentityGuard
from gateway.metrics import Metrics
from gateway.service.gateway_service import GatewayService
from gateway.settings import Settings
from gateway.upstream.events import ChangeEvent

log = logging.getLogger(__name__)


class ChangeEvents:
    """Applies change events; tracks the subscription for readiness and the guard's TTL."""

    def __init__(self, service: GatewayService, guard: IdentityGuard, settings: Settings,
                 metrics: Metrics) -> None:
        self._service = service
        self._guard = guard
        self._settings = settings
        self._metrics = metrics
        self.up = False
        service.events_detail = self.detail  # readiness names a lost subscription
        metrics.change_events_configured.set(1)
        metrics.change_events_up.set(0)

    def apply(self, event: ChangeEvent) -> None:
        if not event.names:  # a commit or a view: no table identity changed
            self._metrics.change_events.labels("ignored").inc()
            return
        removed = sum(self._service.invalidate_changed(event.warehouse_id, ns, name)
                      for ns, name in event.names)
        self._metrics.change_events.labels("applied").inc()
        log.debug("change event applied", extra={"event_type": event.type, "removed": removed})

    def malformed(self) -> None:
        self._metrics.change_events.labels("malformed").inc()

    def state(self, up: bool) -> None:
        self.up = up
        self._metrics.change_events_up.set(1 if up else 0)
        self._guard.set_ttl(self._settings.events.identity_ttl_s if up
                            else self._settings.cache.identity_ttl_s)

    def detail(self) -> str | None:
        """The readiness detail while the subscription is lost (requests go on)."""
        if self.up:
            return None
        return ("change events subscription lost; staleness bounded by "
                f"cache.identity_ttl_s={self._settings.cache.identity_ttl_s:g}s")
