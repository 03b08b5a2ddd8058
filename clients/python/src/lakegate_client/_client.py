"""Client and AsyncClient: the public facades over one gateway (sync for executors, asyncio).

Their shared machinery (lifecycle, per-process state that never crosses a fork, the memo, argument
checks) is in ``_facade.py``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from lakegate_client._clock import Clock
from lakegate_client._config import ClientConfig
from lakegate_client._facade import ClientState, Facade
from lakegate_client._models import Access, LoadedTable, Namespace, check_access
from lakegate_client._ops import (
    CreateTable,
    DropTable,
    GetCredentials,
    ListPage,
    LoadTable,
    Page,
    RenameTable,
)
from lakegate_client._pager import AsyncTablePager, TablePager
from lakegate_client._transport import AsyncTransport, SyncTransport
from lakegate_client.credentials import TableCredentials

__all__ = ["AsyncClient", "Client", "ClientState"]


def _default_sync_transport(config: ClientConfig) -> SyncTransport:
    if config.endpoint.protocol == "grpc":
        from lakegate_client._grpc import SyncGrpcTransport

        return SyncGrpcTransport(config)
    from lakegate_client._http import SyncHttpTransport

    return SyncHttpTransport(config)


def _default_async_transport(config: ClientConfig) -> AsyncTransport:
    if config.endpoint.protocol == "grpc":
        from lakegate_client._grpc import AsyncGrpcTransport

        return AsyncGrpcTransport(config)
    from lakegate_client._http import AsyncHttpTransport

    return AsyncHttpTransport(config)


class Client(Facade[SyncTransport]):
    """Blocking client for executors and drivers.

    Args:
        url: gateway URL (default ``$LAKEGATE_URL``, else ``http://127.0.0.1:8765``); the scheme
            picks the transport: ``http://``, ``unix:/path``, ``grpc://``, ``grpc+unix:/path``.
        token: caller token (default ``$LAKEGATE_TOKEN`` / ``$LAKEGATE_TOKEN_FILE``).
        warehouse: default warehouse name or id (default ``$LAKEGATE_WAREHOUSE``).
        timeout_s: bound on every call (default ``$LAKEGATE_TIMEOUT_S``, else 10 s).
        memo: keep the per-process credential memo (on by default).
        memo_floor_s: the memo serves a credential only while more than this is left (300 s).
        clock, config, transport_factory: injection points for tests.

    Raises:
        ConfigurationError: the URL or another setting is malformed.
    """

    def __init__(
        self,
        url: str | None = None,
        *,
        token: str | None = None,
        warehouse: str | None = None,
        timeout_s: float | None = None,
        memo: bool = True,
        memo_floor_s: float | None = None,
        clock: Clock | None = None,
        config: ClientConfig | None = None,
        transport_factory: Callable[[ClientConfig], SyncTransport] = _default_sync_transport,
    ) -> None:
        super().__init__(
            url,
            token=token,
            warehouse=warehouse,
            timeout_s=timeout_s,
            memo=memo,
            memo_floor_s=memo_floor_s,
            clock=clock,
            config=config,
            transport_factory=transport_factory,
        )

    def credentials(
        self,
        namespace: Namespace,
        table: str,
        warehouse: str | None = None,
        access: Access = "read",
    ) -> TableCredentials:
        """Vended storage credentials for a table.

        Answered from the per-process memo while the last answer has more than the floor left
        (``outcome == "memo"``), else from the gateway (whose cache makes that cheap too).

        Args:
            namespace: ``"ns"``, ``"a.b"`` or ``["a", "b"]``.
            table: table name.
            warehouse: warehouse name or id (default: the client's).
            access: ``"read"`` or ``"write"``.

        Raises:
            NotFoundError, PermissionDeniedError, UnavailableError, GatewayConnectionError,
            GatewayTimeoutError: see the error tree in ``lakegate_client._errors``.
        """
        access = check_access(access)
        ref = self._ref(namespace, table, warehouse)
        memoised = self._memo_get(ref, access)
        if memoised is not None:
            return memoised
        creds = self._transport().send(GetCredentials(ref, access))
        self._memo_put(ref, access, creds)
        return creds

    def load(
        self,
        namespace: Namespace,
        table: str,
        warehouse: str | None = None,
        *,
        vended: bool = False,
        access: Access = "read",
    ) -> LoadedTable:
        """A table's metadata (format, base location, properties); credentials when ``vended``."""
        access = check_access(access)
        ref = self._ref(namespace, table, warehouse)
        return self._transport().send(LoadTable(ref, vended, access))

    def list(self, namespace: Namespace, warehouse: str | None = None) -> TablePager:
        """A namespace's tables, iterated lazily across pages (``list(client.list(ns))``)."""
        wh, ns = self._namespace_ref(namespace, warehouse)

        def fetch(token: str | None) -> Page:
            return self._transport().send(ListPage(wh, ns, token))

        return TablePager(fetch)

    def create(
        self,
        namespace: Namespace,
        table: str,
        format: str,
        base_location: str | None = None,
        warehouse: str | None = None,
        doc: str | None = None,
        properties: Mapping[str, str] | None = None,
    ) -> LoadedTable:
        """Create a generic table (``format``: parquet, delta, lance, csv, json, ...).

        Raises:
            ConflictError: the table exists.
        """
        ref = self._ref(namespace, table, warehouse)
        return self._transport().send(CreateTable(ref, format, base_location, doc, properties))

    def drop(
        self,
        namespace: Namespace,
        table: str,
        warehouse: str | None = None,
        *,
        purge: bool = False,
        force: bool = False,
    ) -> None:
        """Drop a table (``purge`` also deletes its data, as Lakekeeper's purgeRequested)."""
        ref = self._ref(namespace, table, warehouse)
        self._memo_forget(ref)
        self._transport().send(DropTable(ref, purge=purge, force=force))

    def rename(
        self,
        namespace: Namespace,
        table: str,
        new_namespace: Namespace,
        new_table: str,
        warehouse: str | None = None,
    ) -> None:
        """Rename a table within its warehouse."""
        source = self._ref(namespace, table, warehouse)
        destination = self._ref(new_namespace, new_table, source.warehouse)
        self._memo_forget(source)
        self._transport().send(RenameTable(source, destination))

    def open(self) -> Client:
        """Open now instead of on first use (fails fast on a bad configuration)."""
        self._transport()
        return self

    def close(self) -> None:
        """Release this process's channel; later calls raise :class:`ClientClosedError`."""
        transport = self._begin_close()
        if transport is not None:
            transport.close()

    def __enter__(self) -> Client:
        return self.open()

    def __exit__(self, *exc_info: Any) -> None:
        self.close()


class AsyncClient(Facade[AsyncTransport]):
    """Asyncio client; same arguments, methods and errors as :class:`Client`."""

    def __init__(
        self,
        url: str | None = None,
        *,
        token: str | None = None,
        warehouse: str | None = None,
        timeout_s: float | None = None,
        memo: bool = True,
        memo_floor_s: float | None = None,
        clock: Clock | None = None,
        config: ClientConfig | None = None,
        transport_factory: Callable[[ClientConfig], AsyncTransport] = _default_async_transport,
    ) -> None:
        super().__init__(
            url,
            token=token,
            warehouse=warehouse,
            timeout_s=timeout_s,
            memo=memo,
            memo_floor_s=memo_floor_s,
            clock=clock,
            config=config,
            transport_factory=transport_factory,
        )

    async def credentials(
        self,
        namespace: Namespace,
        table: str,
        warehouse: str | None = None,
        access: Access = "read",
    ) -> TableCredentials:
        """Vended storage credentials for a table (see :meth:`Client.credentials`)."""
        access = check_access(access)
        ref = self._ref(namespace, table, warehouse)
        memoised = self._memo_get(ref, access)
        if memoised is not None:
            return memoised
        creds = await self._transport().send(GetCredentials(ref, access))
        self._memo_put(ref, access, creds)
        return creds

    async def load(
        self,
        namespace: Namespace,
        table: str,
        warehouse: str | None = None,
        *,
        vended: bool = False,
        access: Access = "read",
    ) -> LoadedTable:
        """A table's metadata; credentials when ``vended``."""
        access = check_access(access)
        ref = self._ref(namespace, table, warehouse)
        return await self._transport().send(LoadTable(ref, vended, access))

    def list(self, namespace: Namespace, warehouse: str | None = None) -> AsyncTablePager:
        """``async for`` over a namespace's tables, page by page; ``await`` collects a list."""
        wh, ns = self._namespace_ref(namespace, warehouse)

        async def fetch(token: str | None) -> Page:
            return await self._transport().send(ListPage(wh, ns, token))

        return AsyncTablePager(fetch)

    async def create(
        self,
        namespace: Namespace,
        table: str,
        format: str,
        base_location: str | None = None,
        warehouse: str | None = None,
        doc: str | None = None,
        properties: Mapping[str, str] | None = None,
    ) -> LoadedTable:
        """Create a generic table."""
        ref = self._ref(namespace, table, warehouse)
        op = CreateTable(ref, format, base_location, doc, properties)
        return await self._transport().send(op)

    async def drop(
        self,
        namespace: Namespace,
        table: str,
        warehouse: str | None = None,
        *,
        purge: bool = False,
        force: bool = False,
    ) -> None:
        """Drop a table."""
        ref = self._ref(namespace, table, warehouse)
        self._memo_forget(ref)
        await self._transport().send(DropTable(ref, purge=purge, force=force))

    async def rename(
        self,
        namespace: Namespace,
        table: str,
        new_namespace: Namespace,
        new_table: str,
        warehouse: str | None = None,
    ) -> None:
        """Rename a table within its warehouse."""
        source = self._ref(namespace, table, warehouse)
        destination = self._ref(new_namespace, new_table, source.warehouse)
        self._memo_forget(source)
        await self._transport().send(RenameTable(source, destination))

    async def open(self) -> AsyncClient:
        """Open now instead of on first use."""
        self._transport()
        return self

    async def aclose(self) -> None:
        """Release this process's channel; later calls raise :class:`ClientClosedError`."""
        transport = self._begin_close()
        if transport is not None:
            await transport.aclose()

    async def __aenter__(self) -> AsyncClient:
        return await self.open()

    async def __aexit__(self, *exc_info: Any) -> None:
        await self.aclose()
