"""FakeOperations: an in-memory service behind the surfaces (real behaviour, no cache/upstream).

Tables live in a dict; credentials are minted per (warehouse id, namespace, table, access) with a
configurable expiry; errors can be planted per operation; `hold` makes calls wait on an Event so
drain and cancellation can be tested without sleeping.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from gateway.errors import (
    ConflictError,
    GatewayError,
    InvalidRequestError,
    NotFoundError,
    UpstreamBadRequestError,
)
from gateway.identity import ExpectedIdentity
from gateway.models import (
    AccessMode,
    CreateTableSpec,
    CredentialLookup,
    CredentialSet,
    GenericTable,
    ListResult,
    LoadResult,
    Outcome,
    RequestContext,
    StorageCredential,
    TableIdentifier,
    TableRef,
    UpstreamResponse,
    Warehouse,
)

WAREHOUSE = Warehouse(id="0198f2a4-6c1e-7d32-9a51-3f0b2c7e9d10", name="demo")
NOW_S = 1_800_000_000.0
SECRET_KEY = "fakeSecretKey/0123456789abcdefghijklmnopqrstu"  # noqa: S105 - test secret
SESSION_TOKEN = "FakeSessionToken" + "x" * 120


@dataclass
class FakeClock:
    """A manual clock: time moves only when a test says so."""

    mono: float = 1000.0
    wall: float = NOW_S

    def monotonic(self) -> float:
        return self.mono

    def now(self) -> float:
        return self.wall

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(0)

    def advance(self, seconds: float) -> None:
        self.mono += seconds
        self.wall += seconds


@dataclass
class FakeOperations:
    """Implements gateway.surfaces.operations.Operations in memory."""

    outcome: Outcome = Outcome.MISS
    lifetime_s: float = 3600.0
    identity_ttl_s: float | None = 30.0
    errors: dict[str, GatewayError] = field(default_factory=dict)
    hold: asyncio.Event | None = None
    entered: asyncio.Event = field(default_factory=asyncio.Event)  # set on the first call
    ready: tuple[bool, str] = (True, "ok")
    calls: Counter[str] = field(default_factory=Counter)
    contexts: list[RequestContext] = field(default_factory=list)
    tables: dict[tuple[str, tuple[str, ...], str], GenericTable] = field(default_factory=dict)
    forwarded: list[tuple[str, str, str]] = field(default_factory=list)
    invalidated: list[TableRef | None] = field(default_factory=list)
    expects: list[ExpectedIdentity | None] = field(default_factory=list)
    min_left: list[float | None] = field(default_factory=list)
    accesses: list[AccessMode] = field(default_factory=list)
    refs: list[TableRef] = field(default_factory=list)  # as get_credentials received them
    started: bool = False
    closed: bool = False

    def add_table(self, namespace: tuple[str, ...], name: str, fmt: str = "lance") -> None:
        self.tables[(WAREHOUSE.id, tuple(p.lower() for p in namespace), name.lower())] = (
            GenericTable(name=name, format=fmt,
                         base_location=f"s3://warehouse/{'/'.join(namespace)}/{name}")
        )

    async def _enter(self, op: str, ctx: RequestContext | None = None) -> None:
        self.calls[op] += 1
        if ctx is not None:
            self.contexts.append(ctx)
        self.entered.set()
        if self.hold is not None:
            await self.hold.wait()
        if op in self.errors:
            raise self.errors[op]

    def _wh(self, given: str) -> Warehouse:
        if given.lower() in (WAREHOUSE.id, WAREHOUSE.name):
            return WAREHOUSE
        raise NotFoundError(f"warehouse '{given}' not found",
                            lakekeeper_type="NoSuchWarehouseException")

    def _table(self, ref: TableRef) -> GenericTable:
        wh = self._wh(ref.warehouse)
        key = (wh.id, tuple(p.lower() for p in ref.namespace), ref.name.lower())
        if key not in self.tables:
            raise NotFoundError("Generic table not found",
                                lakekeeper_type="NoSuchGenericTableException")
        return self.tables[key]

    def credential_set(self, table: GenericTable) -> CredentialSet:
        expires_ms = int((NOW_S + self.lifetime_s) * 1000)
        cred = StorageCredential(
            prefix=table.base_location,
            config={
                "s3.access-key-id": "ASIAFAKEACCESSKEY0001",
                "s3.secret-access-key": SECRET_KEY,
                "s3.session-token": SESSION_TOKEN,
                "s3.region": "us-east-1",
                "s3.endpoint": "http://127.0.0.1:1",
                "s3.session-token-expires-at-ms": str(expires_ms),
            },
            expires_at_ms=expires_ms,
        )
        return CredentialSet(credentials=(cred,), expires_at_ms=expires_ms,
                             location=table.base_location)

    def credentials_now(self, ref: TableRef, access: AccessMode, ctx: RequestContext, *,
                        min_left_s: float | None = None) -> CredentialLookup | None:
        """No synchronous hits: every request reaches `get_credentials` (counted there)."""
        return None

    async def get_credentials(self, ref: TableRef, access: AccessMode,
                              ctx: RequestContext, *,
                              expect: ExpectedIdentity | None = None,
                              min_left_s: float | None = None) -> CredentialLookup:
        await self._enter("get_credentials", ctx)
        self.accesses.append(access)
        self.refs.append(ref)
        self.expects.append(expect)
        self.min_left.append(min_left_s)
        table = self._table(ref)
        return CredentialLookup(warehouse=self._wh(ref.warehouse), ref=ref, access=access,
                                credentials=self.credential_set(table), outcome=self.outcome,
                                remaining_s=self.lifetime_s, identity_ttl_s=self.identity_ttl_s)

    async def load_table(self, ref: TableRef, ctx: RequestContext, *, vended: bool,
                         access: AccessMode = AccessMode.READ) -> LoadResult:
        await self._enter("load_table", ctx)
        self.accesses.append(access)
        table = self._table(ref)
        if not vended:
            return LoadResult(table=table, config=None, credentials=None,
                              warehouse=self._wh(ref.warehouse))
        creds = self.credential_set(table)
        config = {k: v for k, v in creds.credentials[0].config.items() if "expires" not in k}
        return LoadResult(table=table, config=config, credentials=creds.credentials,
                          warehouse=self._wh(ref.warehouse), outcome=self.outcome)

    async def list_tables(self, warehouse: str, namespace: tuple[str, ...], ctx: RequestContext,
                          *, page_token: str | None, page_size: int | None) -> ListResult:
        await self._enter("list_tables", ctx)
        wh = self._wh(warehouse)
        names = sorted(t.name for (w, ns, _), t in self.tables.items()
                       if w == wh.id and ns == tuple(p.lower() for p in namespace))
        if page_size is not None and not 1 <= page_size <= 1000:  # as the service's setting
            raise InvalidRequestError("page size must be between 1 and 1000")
        if page_token is not None and not page_token.isdigit():
            raise UpstreamBadRequestError("invalid page token")  # the catalog's answer
        start = int(page_token or 0)
        size = page_size or 100
        page = names[start:start + size]
        token = str(start + size) if start + size < len(names) else None
        return ListResult(
            identifiers=tuple(TableIdentifier(namespace=namespace, name=n, format="lance",
                                              id=f"id-{n}") for n in page),
            next_page_token=token,
        )

    async def create_table(self, warehouse: str, namespace: tuple[str, ...],
                           spec: CreateTableSpec, ctx: RequestContext) -> LoadResult:
        await self._enter("create_table", ctx)
        wh = self._wh(warehouse)
        key = (wh.id, tuple(p.lower() for p in namespace), spec.name.lower())
        if key in self.tables:
            raise ConflictError("Generic table already exists",
                                lakekeeper_type="GenericTableAlreadyExists")
        self.add_table(namespace, spec.name, spec.format)
        return LoadResult(table=self.tables[key], config=None, credentials=None, warehouse=wh)

    async def drop_table(self, ref: TableRef, ctx: RequestContext, *,
                         purge: bool | None = None, force: bool = False) -> None:
        await self._enter("drop_table", ctx)
        self._table(ref)
        wh = self._wh(ref.warehouse)
        del self.tables[(wh.id, tuple(p.lower() for p in ref.namespace), ref.name.lower())]

    async def rename_table(self, warehouse: str, source: tuple[tuple[str, ...], str],
                           destination: tuple[tuple[str, ...], str], ctx: RequestContext) -> None:
        await self._enter("rename_table", ctx)
        table = self._table(TableRef(warehouse, source[0], source[1]))
        wh = self._wh(warehouse)
        del self.tables[(wh.id, tuple(p.lower() for p in source[0]), source[1].lower())]
        self.tables[(wh.id, tuple(p.lower() for p in destination[0]), destination[1].lower())] = (
            GenericTable(name=destination[1], format=table.format,
                         base_location=table.base_location)
        )

    async def resolve_warehouse(self, warehouse: str, ctx: RequestContext) -> Warehouse:
        await self._enter("resolve_warehouse", ctx)
        return self._wh(warehouse)

    async def catalog_config(self, warehouse_query: str, ctx: RequestContext) -> dict[str, Any]:
        await self._enter("catalog_config", ctx)
        wh = self._wh(warehouse_query)
        return {"defaults": {"prefix": wh.id}, "overrides": {"uri": "http://upstream/catalog"},
                "endpoints": [*SERVED_ICEBERG_ENDPOINTS, *UNSERVED_ICEBERG_ENDPOINTS]}

    async def forward(self, method: str, path: str, query: str, body: bytes | None,
                      ctx: RequestContext, headers: Any = None) -> UpstreamResponse:
        await self._enter("forward", ctx)
        self.forwarded.append((method, path, query))
        return UpstreamResponse(status=200, headers={"Content-Type": "application/json"},
                                body=b'{"namespaces": [["demo_ns"]]}')

    def invalidate(self, ref: TableRef | None = None, *, all: bool = False) -> int:
        self.calls["invalidate"] += 1
        self.invalidated.append(ref)
        return 3 if all else 1

    async def readiness(self) -> tuple[bool, str]:
        return self.ready

    async def start(self) -> None:
        self.started = True

    async def close(self) -> None:
        self.closed = True


SERVED_ICEBERG_ENDPOINTS = [  # sorted
    "DELETE /v1/{prefix}/namespaces/{namespace}/tables/{table}",
    "GET /v1/{prefix}/namespaces",
    "GET /v1/{prefix}/namespaces/{namespace}",
    "GET /v1/{prefix}/namespaces/{namespace}/tables",
    "GET /v1/{prefix}/namespaces/{namespace}/tables/{table}",
    "GET /v1/{prefix}/namespaces/{namespace}/tables/{table}/credentials",
    "HEAD /v1/{prefix}/namespaces/{namespace}",
    "HEAD /v1/{prefix}/namespaces/{namespace}/tables/{table}",
    "POST /v1/{prefix}/namespaces",
    "POST /v1/{prefix}/namespaces/{namespace}/tables",
    "POST /v1/{prefix}/namespaces/{namespace}/tables/{table}",
    "POST /v1/{prefix}/tables/rename",
]
"""The Iceberg REST endpoints the gateway has routes for (what its `/config` may advertise)."""

UNSERVED_ICEBERG_ENDPOINTS = [
    "DELETE /v1/{prefix}/namespaces/{namespace}",
    "POST /v1/{prefix}/namespaces/{namespace}/properties",
    "POST /v1/{prefix}/namespaces/{namespace}/register",
    "POST /v1/{prefix}/namespaces/{namespace}/tables/{table}/metrics",
    "POST /v1/{prefix}/transactions/commit",
    "GET /v1/{prefix}/namespaces/{namespace}/views",
    "POST /v1/{prefix}/namespaces/{namespace}/views",
]
"""Endpoints a catalog advertises that the gateway does not serve (never advertised by it)."""


class RotatingOperations(FakeOperations):
    """Serves the SAME CredentialSet object until `rotate()`, like the real cache on hits."""

    def __init__(self) -> None:
        super().__init__()
        self.generation = 0
        self._sets: dict[str, CredentialSet] = {}

    def credential_set(self, table: GenericTable) -> CredentialSet:
        cached = self._sets.get(table.name)
        if cached is None:
            base = super().credential_set(table)
            cred = base.credentials[0]
            config = dict(cred.config)
            config["s3.access-key-id"] = f"ASIAROTATED{self.generation:09d}"
            cached = self._sets[table.name] = CredentialSet(
                credentials=(StorageCredential(cred.prefix, config, cred.expires_at_ms),),
                expires_at_ms=base.expires_at_ms, location=base.location)
        return cached

    def rotate(self) -> None:
        self.generation += 1
        self._sets.clear()

    async def keys_across_rotation(self, fetch: Callable[[], Awaitable[str]]) -> list[str]:
        """The access key each of 4 fetches got, rotating before the third."""
        keys = []
        for i in range(4):
            if i == 2:
                self.rotate()
            keys.append(await fetch())
        return keys


ROTATED_KEYS = ["ASIAROTATED000000000"] * 2 + ["ASIAROTATED000000001"] * 2
"""What `keys_across_rotation` sees when every request is served the current set."""
