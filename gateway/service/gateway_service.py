"""GatewayService: the transport-neutral operations both surfaces call.

Surfaces parse, authenticate and render; this module resolves warehouses, consults the
credential cache, calls the catalog and invalidates the cache on mutations. It knows nothing
about HTTP or gRPC, and the layers below it know nothing about callers.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from dataclasses import KW_ONLY, dataclass, field
from typing import Any

from cachetools import TTLCache

from gateway.audit import AuditTrail
from gateway.cache import CredentialCache, CredentialKeys, MetadataCache, WarehouseResolver
from gateway.cache.credential_keys import cache_key
from gateway.cache.expiry import is_expiry_key
from gateway.cache.identity import IdentityGuard
from gateway.cache.policy import is_deterministic, remaining_until
from gateway.clock import Clock
from gateway.errors import GatewayError, InvalidRequestError
from gateway.identity import ExpectedIdentity, covers, same_location
from gateway.models import (
    AccessMode,
    CacheKey,
    CreateTableSpec,
    CredentialLookup,
    CredentialSet,
    GenericTable,
    ListResult,
    LoadResult,
    Outcome,
    RequestContext,
    StorageCredential,
    TableRef,
    UpstreamResponse,
    Warehouse,
)
from gateway.names import is_uuid
from gateway.service.own_creates import OwnCreates
from gateway.settings import Settings
from gateway.tuning import EVENTS_CALLER_IDENTITY_TTL_S, HEALTH_TTL_S
from gateway.upstream.events import ChangeEvent
from gateway.upstream.lakekeeper import CatalogClient
from gateway.upstream.token_source import TokenSource

_COALESCED = Outcome.COALESCED
_READ = AccessMode.READ


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
        if covers(cred.prefix, location) and (
            best is None or len(cred.prefix) > len(best.prefix)
        ):
            best = cred
    if best is None and creds.credentials:
        best = creds.credentials[0]
    return best


@dataclass(eq=False, repr=False)
class GatewayService:
    """The operations of docs/contracts.md §4 and §5, shared by the HTTP and gRPC surfaces.

    Thin on purpose: each operation resolves through the caches and calls the catalog; the
    caches (gateway/cache/) hold all the caching and coalescing, and `wiring.Core` owns every
    lifecycle (token refresh, refresh-ahead, the connection pool).

    Args:
        catalog: the upstream Lakekeeper client.
        cache: the credential cache (fetches through `catalog`).
        metadata: the table metadata cache.
        warehouses: warehouse name → id resolution.
        keys: request → (warehouse, credential cache key), memoized.
        clock: time source.
        settings: validated settings.
        tokens: the session's token source (readiness asks it), None when not used.
        events_detail: the change events' readiness detail (None: nothing to say).
        identity: binds cached answers to the catalog's current table (cache/identity.py).
        audit: the audit trail (default: one line per request, nothing folded).
    """

    catalog: CatalogClient
    cache: CredentialCache
    metadata: MetadataCache
    warehouses: WarehouseResolver
    keys: CredentialKeys
    clock: Clock
    settings: Settings
    _: KW_ONLY
    tokens: TokenSource | None = None
    identity: IdentityGuard
    events_detail: Callable[[], str | None] | None = None
    audit: AuditTrail | None = None
    _health: TTLCache[str, tuple[bool, str]] = field(init=False)
    _audit: AuditTrail = field(init=False)
    own_creates: OwnCreates = field(init=False)

    def __post_init__(self) -> None:
        self.own_creates = OwnCreates(self.clock)
        self._health = TTLCache(maxsize=1, ttl=HEALTH_TTL_S, timer=self.clock.monotonic)
        if self.audit is None:
            self.audit = AuditTrail(self.clock)
        self._audit = self.audit

    # ------------------------------------------------------------------ warehouses
    def _project(self, ctx: RequestContext) -> str:
        return ctx.project_id or self.settings.upstream.project_id or ""

    async def resolve_warehouse(self, warehouse: str, ctx: RequestContext) -> Warehouse:
        """Warehouse name or UUID → Warehouse (see `WarehouseResolver.resolve`).

        Raises:
            NotFoundError: unknown warehouse.
        """
        return await self.warehouses.resolve(warehouse, self._project(ctx), ctx)

    def _key(self, wh: Warehouse, ref: TableRef, access: AccessMode,
             ctx: RequestContext) -> CacheKey:
        return cache_key(self._project(ctx), wh, ref, access, ctx.delegation)

    # ------------------------------------------------------------------ credentials
    def credentials_now(
        self, ref: TableRef, access: AccessMode, ctx: RequestContext, *,
        min_left_s: float | None = None,
    ) -> CredentialLookup | None:
        """`get_credentials` without a coroutine when it is a cache hit whose identity was
        confirmed within the TTL (and with more than `min_left_s` left), else None: await
        `get_credentials`. Executors repeat the same few tables, so this is nearly every
        request; the answer, the audit and the checks (serve floor against the clock, identity
        TTL) are the same as `get_credentials` gives.

        Raises:
            GatewayError: a negative-cached 404/403 (audited, as `get_credentials` does).
        """
        try:
            hit = self.keys.peek(ref, access, self._project(ctx), ctx.delegation)
            if hit is None:
                return None
            got = self.cache.hit(hit[1])
        except GatewayError as exc:
            self._audit.credential(ctx, ref.scope, access, type(exc).__name__)
            raise
        if got is None:
            return None
        confirmed = self.identity.confirmed_now(hit[1], got[0])
        remaining = got[2]
        if confirmed is None or (min_left_s is not None and remaining is not None
                                 and remaining < min_left_s):
            return None
        return self._granted(ctx, hit, ref, access, confirmed[0], got[1], remaining,
                             confirmed[1])

    def _granted(self, ctx: RequestContext, hit: tuple[Warehouse, CacheKey], ref: TableRef,
                 access: AccessMode, creds: CredentialSet, outcome: Outcome,
                 remaining: float | None, confirmed_for: float | None = None) -> CredentialLookup:
        """Audit a grant and build its answer (`confirmed_for`: the identity guard's seconds
        until due, when the caller already has them)."""
        # The member itself (a str): `.value` and `Outcome.X` cost ~1 µs / 0.4 µs on 3.11.
        # A coalesced read's line may follow its answer (it is a folded kind, and the fetch it
        # waited on has its own miss line); every other grant's line is written before.
        self._audit.credential(ctx, ref.scope, access, outcome,
                               defer=outcome is _COALESCED and access is _READ)
        if confirmed_for is None:
            confirmed_for = self.identity.confirmed_for(hit[1], creds)
        # Positional (the field order of CredentialLookup): keywords cost ~0.3 µs a request.
        return CredentialLookup(hit[0], ref, access, creds, outcome, remaining,
                                self._caller_identity_ttl(confirmed_for))

    async def get_credentials(
        self, ref: TableRef, access: AccessMode, ctx: RequestContext, *,
        expect: ExpectedIdentity | None = None, min_left_s: float | None = None,
    ) -> CredentialLookup:
        """Credentials for one table, from the cache or one shared upstream fetch, for the
        table the catalog has now (identity confirmed within `cache.identity_ttl_s`), and for
        the `expect`ed table when the caller names one.

        `min_left_s` (the AWS surface: botocore's refresh window): a cached credential with
        less left is renewed first (one shared refresh), so an SDK refreshes once instead of
        on every call; if the renewal fails or cannot help, the current one is served.

        Raises:
            InvalidRequestError, NotFoundError, ForbiddenError, CredentialExpiredError,
            UpstreamError: as the cache/catalog decide; never an expired credential.
            TableIdentityMismatchError: the catalog's table is not the `expect`ed one.
        """
        where = ref.scope
        try:
            project = self._project(ctx)
            hit = self.keys.peek(ref, access, project, ctx.delegation)  # no coroutine if known
            if hit is None:
                hit = await self.keys.resolve(ref, access, project, ctx)
            key = hit[1]
            # remaining_s on the monotonic clock: a stepped wall clock must not distort it.
            got = await self.cache.lookup(key, ctx)
            # The guard's hot path is a plain call; only a due or expected identity awaits.
            creds = self.identity.confirmed(key, got[0], expect)
            if creds is None:
                creds, outcome, remaining = await self.identity.confirm(key, ctx, expect, got)
            else:
                outcome, remaining = got[1], got[2]
            if min_left_s is not None and remaining is not None and remaining < min_left_s:
                creds, outcome, remaining = await self._renewed(
                    key, min_left_s, (creds, outcome, remaining))
        except GatewayError as exc:
            self._audit.credential(ctx, where, access, type(exc).__name__)
            raise
        return self._granted(ctx, hit, ref, access, creds, outcome, remaining)

    def _caller_identity_ttl(self, left: float) -> float:
        """How long the caller may keep using the answer's identity (the client's memo does):
        until this gateway confirms it again (`left`), and while change events are up at most
        `EVENTS_CALLER_IDENTITY_TTL_S` (an event reaches this gateway, never the caller)."""
        detail = self.events_detail
        if detail is not None and detail() is None and left > EVENTS_CALLER_IDENTITY_TTL_S:
            return EVENTS_CALLER_IDENTITY_TTL_S  # subscribed
        return left

    async def _renewed(self, key: CacheKey, min_left_s: float,
                       got: tuple[CredentialSet, Outcome, float | None],
                       ) -> tuple[CredentialSet, Outcome, float | None]:
        """`key` refreshed now when a refresh can give it more than `min_left_s`, else `got`
        (a failed refresh marks the entry stale and backs off, as a background one does)."""
        task = self.cache.start_refresh(key) if self.cache.renewable(key, min_left_s) else None
        if task is None:
            return got
        try:
            # shield: leaving (cancelled, timed out) never cancels the shared refresh.
            async with asyncio.timeout(self.settings.upstream.deadline_s + 1.0):
                fetched = await asyncio.shield(task)
        except TimeoutError:
            return got
        except GatewayError as err:
            if is_deterministic(err):
                raise  # gone or forbidden now: the old credential must not be served either
            return got  # still above the floor: served, and counted stale by the cache
        return (fetched.value, Outcome.MISS,
                remaining_until(self.clock.monotonic(), fetched.deadline_mono))

    # ------------------------------------------------------------------ tables
    async def _table_metadata(self, wh: Warehouse, ref: TableRef,
                              ctx: RequestContext) -> GenericTable:
        key = CacheKey.of(project=self._project(ctx), warehouse_id=wh.id,
                          namespace=ref.namespace, table=ref.name, access=AccessMode.READ,
                          delegation="client-managed")
        return await self.metadata.get(
            key, lambda: self.catalog.load_table(wh.id, ref.namespace, ref.name, ctx)
        )

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
        key = self._key(wh, ref, access, ctx)
        creds, outcome, _ = await self.identity.lookup(key, ctx)
        if creds.location and not same_location(creds.location, table.base_location):
            # Metadata and credential from different moments around a replacement: load the
            # table again and insist on its location, so the answer is one table's.
            self.metadata.invalidate_table(wh.id, ref.namespace, ref.name)
            table = await self._table_metadata(wh, ref, ctx)
            creds, outcome, _ = await self.identity.lookup(
                key, ctx, ExpectedIdentity(location=table.base_location))
        self._audit.credential(ctx, ref.scope, access, outcome,
                               defer=outcome is _COALESCED and access is _READ)
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
        max_page_size = self.settings.upstream.max_page_size
        if page_size is not None and not 1 <= page_size <= max_page_size:
            raise InvalidRequestError(f"page size must be between 1 and {max_page_size}")
        wh = await self.resolve_warehouse(warehouse, ctx)
        return await self.catalog.list_tables(
            wh.id, namespace, ctx, page_token=page_token, page_size=page_size
        )

    async def create_table(
        self, warehouse: str, namespace: tuple[str, ...], spec: CreateTableSpec,
        ctx: RequestContext,
    ) -> LoadResult:
        """Create a generic table; clears any negative/metadata entry for that name."""
        wh = await self.resolve_warehouse(warehouse, ctx)
        try:
            table = await self.catalog.create_table(wh.id, namespace, spec, ctx)
        except BaseException:
            self._invalidate_table(wh.id, namespace, spec.name)
            raise
        # The new location is known: a replica still showing another is asked again shortly.
        self._invalidate_table(wh.id, namespace, spec.name, after=table.base_location)
        self.own_creates.record(ctx.request_id, wh.id, namespace, spec.name)
        return LoadResult(table=table, config=None, credentials=None, warehouse=wh)

    async def drop_table(
        self, ref: TableRef, ctx: RequestContext, *, purge: bool | None = None,
        force: bool = False,
    ) -> None:
        """Drop a table and invalidate every cache entry for it (all access modes)."""
        wh = await self.resolve_warehouse(ref.warehouse, ctx)
        try:
            await self.catalog.drop_table(wh.id, ref.namespace, ref.name, ctx,
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
            await self.catalog.rename_table(wh.id, source, destination, ctx)
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
        cfg = await self.catalog.config(warehouse_query, ctx)
        prefix = (cfg.get("overrides") or {}).get("prefix") or (cfg.get("defaults") or {}).get(
            "prefix"
        )
        if isinstance(prefix, str) and is_uuid(prefix):
            self.warehouses.remember(self._project(ctx), warehouse_query,
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
        return await self.catalog.forward(method.upper(), path, query, body, ctx,
                                           headers=headers)

    # ------------------------------------------------------------------ admin
    def _invalidate_table(self, warehouse_id: str, namespace: tuple[str, ...],
                          table: str, *, after: str | None = None) -> int:
        # The catalog changed (or may have): its read replica may not show it yet, so the
        # refetch is confirmed again shortly while it still shows the old location.
        self.identity.changed(warehouse_id, namespace, table, after=after)
        return (self.cache.invalidate_table(warehouse_id, namespace, table)
                + self.metadata.invalidate_table(warehouse_id, namespace, table))

    def apply_change(self, event: ChangeEvent) -> int:
        """Drop the entries of every table a catalog change event names (service/change_events).

        But the event of a create this gateway made (service/own_creates.py): every credential
        cached since that create answered is the new table's and stays; what a replica behind
        the create answered meanwhile (a not-found, metadata) goes."""
        wid = event.warehouse_id
        if len(event.names) == 1 and self.own_creates.take(event.type, event.trace_id, wid,
                                                           *event.names[0]):
            self.cache.forget_negative(wid, *event.names[0])
            return self.metadata.invalidate_table(wid, *event.names[0])
        removed = 0
        for namespace, table in event.names:
            self.own_creates.forget(wid, namespace, table)
            removed += self._invalidate_table(wid, namespace, table)
        return removed

    def invalidate(self, ref: TableRef | None = None, *, all: bool = False) -> int:
        """Drop cache entries for one table (`ref`) or everything (`all=True`).

        Returns:
            How many entries were removed (credential and metadata entries).

        Raises:
            InvalidRequestError: neither a ref nor `all` given.
        """
        if all:
            return self.cache.invalidate_all() + self.metadata.clear()
        if ref is None:
            raise InvalidRequestError("give a table or all=true")
        ids = self.warehouses.ids_for(ref.warehouse)
        return sum(self._invalidate_table(wid, ref.namespace, ref.name) for wid in ids)

    async def readiness(self) -> tuple[bool, str]:
        """Ready when a session token is held (or none is needed) and the catalog answers
        `/health`, or when the cache can still serve credentials above the floor."""
        cached = self._health.get("ready")
        if cached is None:
            cached = self._health["ready"] = await self._check_ready()
        detail = self.events_detail() if self.events_detail is not None else None
        # A lost change events subscription never makes the gateway unready (requests go on).
        return cached if detail is None else (cached[0], f"{cached[1]}; {detail}")

    async def _check_ready(self) -> tuple[bool, str]:
        stale_ok = self.cache.servable_entries() > 0
        if self.tokens is not None and not self.tokens.ready():
            try:
                async with asyncio.timeout(self.settings.token.timeout_s):
                    await self.tokens.token()
            except (GatewayError, TimeoutError):
                if stale_ok:
                    return True, "identity provider unavailable; serving cached credentials"
                return False, "no upstream token yet"
        try:
            healthy = await self.catalog.health()
        except GatewayError:
            healthy = False
        if healthy:
            return True, "ok"
        if stale_ok:
            return True, "catalog unreachable; serving cached credentials"
        return False, "catalog unreachable"
