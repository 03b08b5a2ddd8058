"""Client, the blocking facade: GENERATED from ``_async_client.py`` by
``clients/python/unasync.py`` (``make unasync``). Do not edit: edit ``_async_client.py``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from lakegate_client._config import ClientConfig
from lakegate_client._facade import UNREACHABLE, Facade, grpc_transports, uses_grpc
from lakegate_client._models import Access, LoadedTable, Namespace, TableKind
from lakegate_client._ops import ListPage, Page
from lakegate_client._pager import TablePager
from lakegate_client._transport import SyncTransport
from lakegate_client.credentials import TableCredentials

__all__ = ["Client"]


class Client(Facade[SyncTransport]):
    """Blocking client for executors and drivers: ``with`` or ``close()`` releases it.

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

    def _default_transport(self, config: ClientConfig) -> SyncTransport:
        if uses_grpc(config):
            transport: SyncTransport = grpc_transports().SyncGrpcTransport(config)
            return transport
        from lakegate_client._http import SyncHttpTransport

        return SyncHttpTransport(config)

    def credentials(
        self,
        namespace: Namespace,
        table: str,
        warehouse: str | None = None,
        access: Access = "read",
        *,
        kind: TableKind = "generic",
        expected_location: str | None = None,
        table_id: str | None = None,
    ) -> TableCredentials:
        """Vended storage credentials for a table.

        Answered from the per-process memo (``outcome == "memo"``) while the last answer has
        more than the floor left and the gateway's word on its table identity holds (its
        ``identity_ttl_s``, else 5 s), else from the gateway (whose cache makes that cheap
        too). When the gateway cannot be reached, the memo's last answer for the table is
        served while above the floor, as the gateway does while its catalog is unreachable.

        Args:
            namespace: ``"ns"``, ``"a.b"`` or ``["a", "b"]``.
            table: table name.
            warehouse: warehouse name or id (default: the client's).
            access: ``"read"`` or ``"write"``.
            kind: ``"generic"`` (a Lakekeeper generic table) or ``"iceberg"`` (an Iceberg
                table: the same credential shape, from the gateway's cache).
            expected_location, table_id: the table identity the caller planned against (say,
                the driver's ``location``/``table_id``): the answer is for that table, or
                ``TableIdentityMismatchError`` (409) when the catalog's table is another one.
                A memoised answer for another identity is not used.

        Raises:
            NotFoundError, PermissionDeniedError, UnavailableError, GatewayConnectionError,
            GatewayTimeoutError: see the error tree in ``lakegate_client._errors``.
            TableIdentityMismatchError: not the expected table (see above).
        """
        call = self._credentials_call(namespace, table, warehouse, access, kind,
                                      expected_location, table_id)
        if (memoised := call.memoised) is not None:
            return memoised
        try:
            answer = self._transport().send(call.op)
        except UNREACHABLE:
            if (last := call.unreachable()) is None:
                raise
            return last
        return call.answered(answer)

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
        op = self._load_op(namespace, table, warehouse, vended, access)
        return self._transport().send(op)

    def list(self, namespace: Namespace, warehouse: str | None = None) -> TablePager:
        """A namespace's tables, fetched lazily page by page (``.pages()`` per page)."""
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
        op = self._create_op(namespace, table, format, base_location, warehouse, doc, properties)
        return self._transport().send(op)

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
        self._transport().send(self._drop_op(namespace, table, warehouse, purge, force))

    def rename(
        self,
        namespace: Namespace,
        table: str,
        new_namespace: Namespace,
        new_table: str,
        warehouse: str | None = None,
    ) -> None:
        """Rename a table within its warehouse."""
        op = self._rename_op(namespace, table, new_namespace, new_table, warehouse)
        self._transport().send(op)

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
