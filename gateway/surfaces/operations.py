"""The service operations the surfaces call, as a Protocol.

`gateway.service.GatewayService` implements it; unit tests of the surfaces use a fake that does
too, so the surfaces are tested without a cache or an upstream.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from gateway.identity import ExpectedIdentity
from gateway.models import (
    AccessMode,
    CreateTableSpec,
    CredentialLookup,
    ListResult,
    LoadResult,
    RequestContext,
    TableRef,
    UpstreamResponse,
    Warehouse,
)


class Operations(Protocol):
    """Transport-neutral operations, shared by every surface (see docs/contracts.md)."""

    def credentials_now(
        self, ref: TableRef, access: AccessMode, ctx: RequestContext, *,
        min_left_s: float | None = ...,
    ) -> CredentialLookup | None: ...

    async def get_credentials(
        self, ref: TableRef, access: AccessMode, ctx: RequestContext, *,
        expect: ExpectedIdentity | None = ..., min_left_s: float | None = ...,
    ) -> CredentialLookup: ...

    async def load_table(
        self, ref: TableRef, ctx: RequestContext, *, vended: bool, access: AccessMode = ...
    ) -> LoadResult: ...

    async def list_tables(
        self,
        warehouse: str,
        namespace: tuple[str, ...],
        ctx: RequestContext,
        *,
        page_token: str | None,
        page_size: int | None,
    ) -> ListResult: ...

    async def create_table(
        self, warehouse: str, namespace: tuple[str, ...], spec: CreateTableSpec, ctx: RequestContext
    ) -> LoadResult: ...

    async def drop_table(
        self, ref: TableRef, ctx: RequestContext, *, purge: bool | None = ..., force: bool = ...
    ) -> None: ...

    async def rename_table(
        self,
        warehouse: str,
        source: tuple[tuple[str, ...], str],
        destination: tuple[tuple[str, ...], str],
        ctx: RequestContext,
    ) -> None: ...

    async def resolve_warehouse(self, warehouse: str, ctx: RequestContext) -> Warehouse: ...

    async def catalog_config(self, warehouse_query: str, ctx: RequestContext) -> dict[str, Any]: ...

    async def forward(
        self,
        method: str,
        path: str,
        query: str,
        body: bytes | None,
        ctx: RequestContext,
        headers: Mapping[str, str] | None = None,
    ) -> UpstreamResponse: ...

    def invalidate(self, ref: TableRef | None = None, *, all: bool = False) -> int: ...

    async def readiness(self) -> tuple[bool, str]: ...
