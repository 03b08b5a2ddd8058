"""GatewayService: the transport-neutral operations both surfaces call.

Surfaces parse, authenticate and render; this module resolves warehouses, consults the
credential cache, calls the catalog and invalidates the cache on mutations. It knows nothing
about HTTP or gRPC, and the layers below it know nothing about callers.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from collections.abc import Callable, Coroutine, Mapping
from typing import Any, TypeVar

from cachetools import TTLCache

from gateway.audit import credential_event
from gateway.cache import CredentialCache, RefreshAhead, SingleFlight
from gateway.cache.expiry import is_expiry_key
from gateway.clock import Clock
from gateway.errors import GatewayError, InvalidRequestError, UpstreamTimeoutError
from gateway.metrics import Metrics
from gateway.models import (
    AccessMode,
    CacheKey,
    CreateTableSpec,
    CredentialLookup,
    CredentialSet,
    GenericTable,
    ListResult,
    LoadResult,
    RequestContext,
    StorageCredential,
    TableRef,
    UpstreamResponse,
    Warehouse,
)
from gateway.names import is_uuid
from gateway.service.warehouses import WarehouseResolver
from gateway.settings import Settings
from gateway.upstream.lakekeeper import CatalogClient
from gateway.upstream.token_source import TokenSource
from gateway.upstream.transport import Transport

_T = TypeVar("_T")

Spawn = Callable[[Coroutine[Any, Any, Any]], "asyncio.Task[Any]"]

_HEALTH_TTL_S = 2.0
# Credential request → (warehouse resolution key, resolved warehouse, cache key), LRU-bounded.
_KEY_MEMO_MAX = 1024

KeyMemoKey = tuple[TableRef, AccessMode, str, str | None]


def _merge_config(credential: StorageCredential) -> dict[str, str]:
    # Lakekeeper's load `config` is the credential's config minus the expiry keys; building it
    # from the SAME credential means pylakekeeper's "config wins" merge never mixes two creds.
    config = {k: v for k, v in credential.config.items() if not is_expiry_key(k)}
    if "s3.region" in config:
        config.setdefault("region", config["s3.region"])  # Lakekeeper's load config has it too
    return config


def _credential_for(location: str, creds: CredentialSet) -> StorageCredential | None:
    best: StorageCredential | None = None
    for cred in creds.credentials:
        if location.startswith(cred.prefix.rstrip("/")) and (
            best is None or len(cred.prefix) > len(best.prefix)
        ):
            best = cred
    if best is None and creds.credentials:
        best = creds.credentials[0]
    return best


class GatewayService:
    """The operations of docs/contracts.md §4 and §5, shared by the HTTP and gRPC surfaces.

    Args:
        catalog: the upstream Lakekeeper client.
        cache: the credential cache (fetches through `catalog`).
        clock: time source.
        metrics: the one metrics object.
        settings: validated settings.
        spawn: the App's TaskRegistry.spawn, owner of every background task.
        tokens: the session's token source (started and closed with the service).
        refresher: the refresh-ahead loop (None disables it, as in some unit tests).
        transport: closed on `close()` when given.
    """

    def __init__(
        self,
        catalog: CatalogClient,
        cache: CredentialCache,
        clock: Clock,
        metrics: Metrics,
        settings: Settings,
        *,
        spawn: Spawn,
        tokens: TokenSource | None = None,
        refresher: RefreshAhead | None = None,
        transport: Transport | None = None,
    ) -> None:
        self._catalog = catalog
        self._cache = cache
        self._clock = clock
        self._metrics = metrics
        self._settings = settings
        self._spawn = spawn
        self._tokens = tokens
        self._refresher = refresher
        self._transport = transport
        self._warehouses = WarehouseResolver(
            catalog, clock, spawn, ttl_s=settings.cache.warehouse_ttl_s,
            wait_s=settings.upstream.deadline_s + 1.0,
            negative_ttl_s=settings.cache.negative_ttl_s,
        )
        self._meta_flight: SingleFlight[CacheKey, GenericTable] = SingleFlight(spawn)
        self._metadata: TTLCache[CacheKey, GenericTable] = TTLCache(
            maxsize=settings.cache.max_entries,
            ttl=max(settings.cache.metadata_ttl_s, 1e-9),
            timer=clock.monotonic,
        )
        # Per (ref, access, project, delegation): what get_credentials derives before the cache
        # lookup (validation, warehouse resolution, CacheKey). Valid exactly while the
        # resolver still holds the SAME resolution (checked by identity on every use).
        self._key_memo: OrderedDict[KeyMemoKey, tuple[str, Warehouse, CacheKey]] = OrderedDict()
        self._health: tuple[float, bool, str] | None = None
        self._started = False
        self._closed = False

    # ------------------------------------------------------------------ lifecycle
    async def start(self) -> None:
        """Start the token prefetch/refresh and the refresh-ahead loop (idempotent)."""
        if self._started:
            return
        self._started = True
        if self._tokens is not None:
            self._tokens.start(self._spawn)
        if self._refresher is not None:
            self._refresher.start()

    async def close(self) -> None:
        """Stop background work and release the upstream connection pool."""
        if self._closed:
            return
        self._closed = True
        if self._refresher is not None:
            await self._refresher.close()
        if self._tokens is not None:
            await self._tokens.close()
        if self._transport is not None:
            await self._transport.close()

    # ------------------------------------------------------------------ warehouses
    def _project(self, ctx: RequestContext) -> str:
        return ctx.project_id or self._settings.upstream.project_id or ""

    async def resolve_warehouse(self, warehouse: str, ctx: RequestContext) -> Warehouse:
        """Warehouse name or UUID → Warehouse (cached `warehouse_ttl_s`, single-flight).

        A UUID is accepted as is (Lakekeeper's `{prefix}`); a name is resolved through
        `GET /catalog/v1/config?warehouse=<name>` (`defaults.prefix`).

        Raises:
            InvalidRequestError: empty or malformed name.
            NotFoundError: unknown warehouse.
        """
        return await self._warehouses.resolve(warehouse, self._project(ctx), ctx)

    async def _wait(self, aw: Coroutine[Any, Any, tuple[_T, bool]]) -> tuple[_T, bool]:
        # Each waiter keeps its own deadline; the shared fetch keeps running for the others.
        try:
            async with asyncio.timeout(self._settings.upstream.deadline_s + 1.0):
                return await aw
        except TimeoutError as exc:
            raise UpstreamTimeoutError("catalog did not answer within the deadline") from exc

    def _key(self, wh: Warehouse, ref: TableRef, access: AccessMode,
             ctx: RequestContext) -> CacheKey:
        return CacheKey.of(
            project=self._project(ctx), warehouse_id=wh.id, namespace=ref.namespace,
            table=ref.name, access=access, delegation=ctx.delegation, kind=ref.kind,
        )

    # ------------------------------------------------------------------ credentials
    async def get_credentials(
        self, ref: TableRef, access: AccessMode, ctx: RequestContext
    ) -> CredentialLookup:
        """Credentials for one table, from the cache or one shared upstream fetch.

        Raises:
            InvalidRequestError, NotFoundError, ForbiddenError, CredentialExpiredError,
            UpstreamError: as the cache/catalog decide; never an expired credential.
        """
        where = (ref.warehouse, ref.namespace, ref.name)
        try:
            wh, key = await self._credential_key(ref, access, ctx)
            # remaining_s on the monotonic clock: a stepped wall clock must not distort it.
            creds, outcome, remaining = await self._cache.lookup(key, ctx)
        except GatewayError as exc:
            credential_event(ctx, ctx.caller, where, access, type(exc).__name__)
            raise
        credential_event(ctx, ctx.caller, where, access, str(outcome))
        return CredentialLookup(
            warehouse=wh, ref=ref, access=access, credentials=creds, outcome=outcome,
            remaining_s=remaining,
        )

    async def _credential_key(self, ref: TableRef, access: AccessMode,
                              ctx: RequestContext) -> tuple[Warehouse, CacheKey]:
        """Validate `ref`, resolve its warehouse and build the cache key, memoized.

        The memo is a pure function of its key as long as the warehouse resolution is the same
        one: it is used only while the resolver's cached entry is identical (a re-resolution,
        `remember()` or expiry replaces or drops it), so the answer always equals the unmemoized
        path's.
        """
        project = self._project(ctx)
        mk: KeyMemoKey = (ref, access, project, ctx.delegation)
        memo = self._key_memo.get(mk)
        if memo is not None and self._warehouses.peek(memo[0]) is memo[1]:
            self._key_memo.move_to_end(mk)
            return memo[1], memo[2]
        wh = await self._warehouses.resolve(ref.warehouse, project, ctx)
        key = self._key(wh, ref, access, ctx)
        ck = self._warehouses.cache_key(ref.warehouse, project)
        if self._warehouses.peek(ck) is wh:
            self._key_memo[mk] = (ck, wh, key)
            self._key_memo.move_to_end(mk)
            while len(self._key_memo) > _KEY_MEMO_MAX:
                self._key_memo.popitem(last=False)
        return wh, key

    # ------------------------------------------------------------------ tables
    async def _table_metadata(self, wh: Warehouse, ref: TableRef,
                              ctx: RequestContext) -> GenericTable:
        key = CacheKey.of(project=self._project(ctx), warehouse_id=wh.id,
                          namespace=ref.namespace, table=ref.name, access=AccessMode.READ,
                          delegation="client-managed")
        if self._settings.cache.metadata_ttl_s > 0:
            cached: GenericTable | None = self._metadata.get(key)
            if cached is not None:
                return cached
        gen = self._cache.generation

        async def fetch() -> GenericTable:
            table = await self._catalog.load_table(wh.id, ref.namespace, ref.name, ctx)
            # An invalidation during the fetch means the answer may describe the old table.
            if self._settings.cache.metadata_ttl_s > 0 and self._cache.generation == gen:
                self._metadata[key] = table
            return table

        result, _ = await self._wait(self._meta_flight.run(key, fetch))
        return result

    async def load_table(
        self, ref: TableRef, ctx: RequestContext, *, vended: bool,
        access: AccessMode = AccessMode.READ,
    ) -> LoadResult:
        """Load a generic table; with `vended`, attach the cached credential for it.

        `config` and `credentials` come from ONE cached credential set, so pylakekeeper's
        merge (config wins) never mixes keys of two different credentials.
        """
        wh = await self.resolve_warehouse(ref.warehouse, ctx)
        table = await self._table_metadata(wh, ref, ctx)
        if not vended:
            return LoadResult(table=table, config=None, credentials=None, warehouse=wh)
        creds, outcome = await self._cache.get(self._key(wh, ref, access, ctx), ctx)
        credential_event(ctx, ctx.caller, (ref.warehouse, ref.namespace, ref.name), access,
                         str(outcome))
        chosen = _credential_for(table.base_location, creds)
        config = _merge_config(chosen) if chosen is not None else {}
        return LoadResult(table=table, config=config, credentials=creds.credentials,
                          warehouse=wh, outcome=outcome)

    async def list_tables(
        self, warehouse: str, namespace: tuple[str, ...], ctx: RequestContext, *,
        page_token: str | None = None, page_size: int | None = None,
    ) -> ListResult:
        """One page of generic tables (tokens are opaque and passed through).

        Raises:
            InvalidRequestError: `page_size` outside 1..`upstream.max_page_size`.
        """
        max_page_size = self._settings.upstream.max_page_size
        if page_size is not None and not 1 <= page_size <= max_page_size:
            raise InvalidRequestError(f"page size must be between 1 and {max_page_size}")
        wh = await self.resolve_warehouse(warehouse, ctx)
        return await self._catalog.list_tables(
            wh.id, namespace, ctx, page_token=page_token, page_size=page_size
        )

    async def create_table(
        self, warehouse: str, namespace: tuple[str, ...], spec: CreateTableSpec,
        ctx: RequestContext,
    ) -> LoadResult:
        """Create a generic table; clears any negative/metadata entry for that name."""
        wh = await self.resolve_warehouse(warehouse, ctx)
        try:
            table = await self._catalog.create_table(wh.id, namespace, spec, ctx)
        finally:
            self._invalidate_table(wh.id, namespace, spec.name)
        return LoadResult(table=table, config=None, credentials=None, warehouse=wh)

    async def drop_table(
        self, ref: TableRef, ctx: RequestContext, *, purge: bool | None = None,
        force: bool = False,
    ) -> None:
        """Drop a table and invalidate every cache entry for it (all access modes)."""
        wh = await self.resolve_warehouse(ref.warehouse, ctx)
        try:
            await self._catalog.drop_table(wh.id, ref.namespace, ref.name, ctx,
                                           purge=purge, force=force)
        finally:
            # Even on failure (e.g. timeout after the catalog acted) the entry may be wrong.
            self._invalidate_table(wh.id, ref.namespace, ref.name)

    async def rename_table(
        self, warehouse: str, source: tuple[tuple[str, ...], str],
        destination: tuple[tuple[str, ...], str], ctx: RequestContext,
    ) -> None:
        """Rename (or move) a table; invalidates both names."""
        wh = await self.resolve_warehouse(warehouse, ctx)
        try:
            await self._catalog.rename_table(wh.id, source, destination, ctx)
        finally:
            self._invalidate_table(wh.id, *source)
            self._invalidate_table(wh.id, *destination)

    # ------------------------------------------------------------------ pass-through
    async def catalog_config(self, warehouse_query: str, ctx: RequestContext) -> dict[str, Any]:
        """The upstream `/catalog/v1/config?warehouse=` JSON (the surface rewrites `uri`)."""
        if is_uuid(warehouse_query):
            wh = await self.resolve_warehouse(warehouse_query, ctx)
            return {"defaults": {"prefix": wh.id}, "overrides": {"prefix": wh.id},
                    "endpoints": []}
        cfg = await self._catalog.config(warehouse_query, ctx)
        prefix = (cfg.get("overrides") or {}).get("prefix") or (cfg.get("defaults") or {}).get(
            "prefix"
        )
        if isinstance(prefix, str) and is_uuid(prefix):
            self._warehouses.remember(self._project(ctx), warehouse_query,
                                      Warehouse(id=prefix.lower(), name=warehouse_query))
        return cfg

    async def forward(
        self, method: str, path: str, query: str, body: bytes | None, ctx: RequestContext,
        headers: Mapping[str, str] | None = None,
    ) -> UpstreamResponse:
        """Raw pass-through of an allow-listed Lakekeeper route with the gateway's token.

        The surface owns the allow-list; this only refuses paths that try to escape it.
        """
        if not path.startswith("/") or ".." in path.split("/") or "//" in path:
            raise InvalidRequestError("invalid path")
        return await self._catalog.forward(method.upper(), path, query, body, ctx,
                                           headers=headers)

    # ------------------------------------------------------------------ admin
    def _invalidate_table(self, warehouse_id: str, namespace: tuple[str, ...],
                          table: str) -> int:
        n = self._cache.invalidate_table(warehouse_id, namespace, table)
        for key in [k for k in list(self._metadata.keys())
                    if k.same_table(warehouse_id, namespace, table)]:
            self._metadata.pop(key, None)
            n += 1
        return n

    def invalidate(self, ref: TableRef | None = None, *, all: bool = False) -> int:
        """Drop cache entries for one table (`ref`) or everything (`all=True`).

        Returns:
            How many entries were removed (credential and metadata entries).

        Raises:
            InvalidRequestError: neither a ref nor `all` given.
        """
        if all:
            n = self._cache.invalidate_all() + len(self._metadata)
            self._metadata.clear()
            return n
        if ref is None:
            raise InvalidRequestError("give a table or all=true")
        ids = self._warehouses.ids_for(ref.warehouse)
        return sum(self._invalidate_table(wid, ref.namespace, ref.name) for wid in ids)

    async def readiness(self) -> tuple[bool, str]:
        """Ready when a session token is held (or none is needed) and the catalog answers
        `/health`, or when the cache can still serve credentials above the floor."""
        now = self._clock.monotonic()
        if self._health is not None and now - self._health[0] < _HEALTH_TTL_S:
            return self._health[1], self._health[2]
        result = await self._check_ready()
        self._health = (now, *result)
        return result

    async def _check_ready(self) -> tuple[bool, str]:
        stale_ok = self._cache.servable_entries() > 0
        if self._tokens is not None and not self._tokens.ready():
            try:
                async with asyncio.timeout(self._settings.token.timeout_s):
                    await self._tokens.token()
            except (GatewayError, TimeoutError):
                if stale_ok:
                    return True, "identity provider unavailable; serving cached credentials"
                return False, "no upstream token yet"
        try:
            healthy = await self._catalog.health()
        except GatewayError:
            healthy = False
        if healthy:
            return True, "ok"
        if stale_ok:
            return True, "catalog unreachable; serving cached credentials"
        return False, "catalog unreachable"
