"""Wiring: the production object graph (`Core`) and the lifecycles of its parts.

transport → token source → catalog client → caches (credentials, metadata, warehouses, keys)
→ GatewayService. `Core.start()` starts the background work (token prefetch/refresh, credential
refresh-ahead) through the App's task registry; `Core.close()` stops it and releases the
connection pool, in reverse order. The App builds the listeners around `core.service` and runs
the Core; nothing else constructs these parts.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Coroutine
from dataclasses import KW_ONLY, dataclass, field
from typing import Any

from gateway.audit import AuditTrail
from gateway.cache import (
    CredentialCache,
    CredentialKeys,
    MetadataCache,
    RefreshAhead,
    WarehouseResolver,
)
from gateway.cache.expiry import credential_set, storage_credential
from gateway.cache.identity import IdentityGuard
from gateway.clock import Clock, SystemClock
from gateway.clock_skew import ClockSkew
from gateway.concurrency import Spawn
from gateway.metrics import Metrics
from gateway.models import CacheKey, CredentialSet, RequestContext
from gateway.service.change_events import ChangeEvents
from gateway.service.gateway_service import GatewayService
from gateway.service.signing import SigningService
from gateway.settings import Settings
from gateway.upstream.events import ChangeEventSubscription
from gateway.upstream.lakekeeper import CatalogClient
from gateway.upstream.table_identity import TableIdentityLoader
from gateway.upstream.token_source import TokenSource, build_token_source
from gateway.upstream.transport import AiohttpTransport, Transport, upstream_ssl_context


def catalog_fetcher(
    catalog: CatalogClient,
) -> Callable[[CacheKey, RequestContext], Coroutine[Any, Any, CredentialSet]]:
    """The cache's fetcher: one upstream credentials call, expiries parsed from the keys."""

    async def fetch(key: CacheKey, ctx: RequestContext) -> CredentialSet:
        creds, date_s = await catalog.load_credentials_dated(key, ctx)
        return credential_set((storage_credential(c.prefix, c.config) for c in creds),
                              server_date_s=date_s)

    return fetch


@dataclass(eq=False, repr=False)
class Core:
    """The daemon's core: the service and everything it stands on, with one lifecycle.

    Args:
        service: the operations the surfaces call.
        spawn: the App's TaskRegistry.spawn (owner of every background task).
        tokens: the session's token source.
        refresher: the refresh-ahead loop (None disables it, as in some unit tests).
        transport: the upstream connection pool (closed last).
        events: the change events subscription (None: not configured).
        audit: the service's audit trail (its fold is flushed on close).
        signing: the node's S3 signer (None: the sign route is not mounted).
    """

    service: GatewayService
    spawn: Spawn
    _: KW_ONLY
    tokens: TokenSource
    refresher: RefreshAhead | None
    transport: Transport
    events: ChangeEventSubscription | None = None
    audit: AuditTrail | None = None
    signing: SigningService | None = None
    _started: bool = field(init=False, default=False)
    _closed: bool = field(init=False, default=False)

    async def start(self) -> None:
        """Start the token prefetch/refresh and the refresh-ahead loop (idempotent)."""
        if self._started:
            return
        self._started = True
        self.tokens.start(self.spawn)
        if self.refresher is not None:
            self.refresher.start()
        if self.events is not None:
            self.events.start()
        if self.audit is not None:
            self.audit.start()

    async def close(self) -> None:
        """Stop background work, then release the upstream connection pool (idempotent)."""
        if self._closed:
            return
        self._closed = True
        if self.events is not None:
            await self.events.close()
        if self.refresher is not None:
            await self.refresher.close()
        await self.tokens.close()
        await self.transport.close()
        if self.audit is not None:  # last: the refresher and token work are done too
            await self.audit.close()


def build_core(
    settings: Settings, metrics: Metrics, spawn: Spawn, clock: Clock | None = None,
    *, transport: Transport | None = None, rng: random.Random | None = None,
) -> Core:
    """Wire the production object graph.

    Args:
        settings: validated settings.
        metrics: the App's metrics.
        spawn: the App's TaskRegistry.spawn.
        clock: defaults to SystemClock.
        transport: defaults to an AiohttpTransport (tests may inject a fake).
        rng: randomness for jitter (tests pass a seeded one).
    """
    clock = clock or SystemClock()
    rng = rng or random.Random()  # noqa: S311 - jitter, not cryptography
    transport = transport or AiohttpTransport(
        pool_size=settings.upstream.pool_size,
        ssl_context=upstream_ssl_context(settings.upstream),
        trust_env=settings.upstream.trust_env,
    )
    wait_s = settings.upstream.deadline_s + 1.0  # one caller's wait for a shared upstream call
    skew = ClockSkew(clock, metrics)  # the catalog's and the IdP's clocks, for the clock rule
    tokens = build_token_source(settings.token, transport, clock, metrics, rng=rng, skew=skew)
    catalog = CatalogClient(transport, tokens, settings.upstream, metrics, clock, rng=rng,
                            skew=skew)
    cache = CredentialCache(catalog_fetcher(catalog), settings.cache, clock, metrics, spawn,
                            deadline_s=wait_s, rng=rng, skew=skew)
    refresher = RefreshAhead(cache, settings.cache, clock, metrics, spawn)
    warehouses = WarehouseResolver(
        catalog, clock, spawn, wait_s=wait_s,
        # A name reused for another warehouse has no event, and the identity check reloads by
        # id: the name is re-checked within the identity TTL (without events: §4).
        ttl_s=min(settings.cache.warehouse_ttl_s, settings.cache.identity_ttl_s),
        negative_ttl_s=settings.cache.negative_ttl_s,
    )
    metadata = MetadataCache(
        ttl_s=settings.cache.metadata_ttl_s, max_entries=settings.cache.max_entries,
        clock=clock, spawn=spawn, generation=lambda: cache.generation, wait_s=wait_s,
    )
    identity = IdentityGuard(cache, TableIdentityLoader(catalog).load,
                             settings.cache.identity_ttl_s, clock, metrics, spawn,
                             deadline_s=wait_s, max_entries=settings.cache.max_entries)
    audit = AuditTrail(clock, settings.log.audit_interval_s, spawn)
    service = GatewayService(catalog, cache, metadata, warehouses, CredentialKeys(warehouses),
                             clock, settings, tokens=tokens, identity=identity, audit=audit)
    subscription = None
    if settings.events.enabled:
        events = ChangeEvents(service, identity, settings, metrics, clock, spawn)
        subscription = ChangeEventSubscription(settings.events, events, clock, spawn)
    # The node's S3 signer: signs with the cached credentials, on the catalog's clock when
    # the local one is off (clock_skew.py).
    signing = SigningService(
        service, clock, spawn, audit=audit, metrics=metrics, wait_s=wait_s,
        reference_now=lambda: skew.reference_now("catalog", clock.monotonic()),
        max_skew_s=skew.max_skew_s, max_entries=settings.cache.max_entries)
    return Core(service, spawn, tokens=tokens, refresher=refresher, transport=transport,
                events=subscription, audit=audit, signing=signing)
