"""Wiring of the production object graph: transport → token source → catalog → cache."""

from __future__ import annotations

import random
from collections.abc import Callable, Coroutine
from typing import Any

from gateway.cache import CredentialCache, RefreshAhead
from gateway.cache.expiry import credential_set, storage_credential
from gateway.clock import Clock, SystemClock
from gateway.metrics import Metrics
from gateway.models import CacheKey, CredentialSet, RequestContext
from gateway.service.gateway_service import GatewayService, Spawn
from gateway.settings import Settings
from gateway.upstream.lakekeeper import CatalogClient
from gateway.upstream.token_source import build_token_source
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


def build_service(
    settings: Settings, metrics: Metrics, spawn: Spawn, clock: Clock | None = None,
    *, transport: Transport | None = None, rng: random.Random | None = None,
) -> GatewayService:
    """Wire the production object graph: transport → token source → catalog → cache.

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
    tokens = build_token_source(settings.token, transport, clock, metrics, rng=rng)
    catalog = CatalogClient(transport, tokens, settings.upstream, metrics, clock, rng=rng)
    cache = CredentialCache(catalog_fetcher(catalog), settings.cache, clock, metrics, spawn,
                            deadline_s=settings.upstream.deadline_s + 1.0, rng=rng)
    refresher = RefreshAhead(cache, settings.cache, clock, metrics, spawn)
    return GatewayService(catalog, cache, clock, metrics, settings, spawn=spawn, tokens=tokens,
                          refresher=refresher, transport=transport)
