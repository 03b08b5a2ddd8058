"""The two transport interfaces the client facades drive (HTTP and gRPC implement both).

One method per gateway operation, returning the client's value types; errors are already
``LakegateError``. ``connection_id`` names the underlying channel/connection pool and the pid
that created it, so tests can prove a forked child never reuses its parent's.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol

from lakegate_client._base import TableRef
from lakegate_client._models import Access, LoadedTable, TableIdentifier
from lakegate_client.credentials import TableCredentials

__all__ = ["AsyncTransport", "SyncTransport"]

Page = tuple[list[TableIdentifier], str | None]


class SyncTransport(Protocol):
    """Blocking transport."""

    @property
    def connection_id(self) -> str:
        """``<pid>:<id of the channel or connection pool>``."""
        ...

    def credentials(self, ref: TableRef, access: Access) -> TableCredentials:
        """Vended credentials for one table."""
        ...

    def load(self, ref: TableRef, vended: bool, access: Access) -> LoadedTable:
        """A table's metadata (with credentials when ``vended``)."""
        ...

    def list_page(self, warehouse: str, namespace: tuple[str, ...], page_token: str | None) -> Page:
        """One page of a namespace's tables."""
        ...

    def create(
        self,
        ref: TableRef,
        format: str,
        base_location: str | None,
        doc: str | None,
        properties: Mapping[str, str] | None,
        idempotency_key: str,
    ) -> LoadedTable:
        """Create a generic table."""
        ...

    def drop(self, ref: TableRef, purge: bool, force: bool) -> None:
        """Drop a table."""
        ...

    def rename(self, source: TableRef, destination: TableRef) -> None:
        """Rename a table within its warehouse."""
        ...

    def close(self) -> None:
        """Release the channel or connections (only ever in the process that made them)."""
        ...


class AsyncTransport(Protocol):
    """Asyncio transport (same operations)."""

    @property
    def connection_id(self) -> str:
        """``<pid>:<id of the channel or session>``."""
        ...

    async def credentials(self, ref: TableRef, access: Access) -> TableCredentials:
        """Vended credentials for one table."""
        ...

    async def load(self, ref: TableRef, vended: bool, access: Access) -> LoadedTable:
        """A table's metadata (with credentials when ``vended``)."""
        ...

    async def list_page(
        self, warehouse: str, namespace: tuple[str, ...], page_token: str | None
    ) -> Page:
        """One page of a namespace's tables."""
        ...

    async def create(
        self,
        ref: TableRef,
        format: str,
        base_location: str | None,
        doc: str | None,
        properties: Mapping[str, str] | None,
        idempotency_key: str,
    ) -> LoadedTable:
        """Create a generic table."""
        ...

    async def drop(self, ref: TableRef, purge: bool, force: bool) -> None:
        """Drop a table."""
        ...

    async def rename(self, source: TableRef, destination: TableRef) -> None:
        """Rename a table within its warehouse."""
        ...

    async def aclose(self) -> None:
        """Release the channel or session."""
        ...
