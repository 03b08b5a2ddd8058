"""gRPC transports (sync, and asyncio over the same sync channel) for ``lakegate.v1``.

A channel is made by the client facade once per process: gRPC channels hold background threads
and sockets that do not survive ``fork()``, so a child must never touch its parent's channel (not
even to close it, which could shut down the parent's shared socket). Every call carries a
deadline and the caller's authentication metadata.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable, Mapping
from typing import Any

import grpc

from lakegate.v1 import catalog_pb2, catalog_pb2_grpc, credentials_pb2_grpc
from lakegate_client import _proto
from lakegate_client._auth import CallerAuth
from lakegate_client._base import TableRef
from lakegate_client._config import ClientConfig
from lakegate_client._models import Access, LoadedTable
from lakegate_client._transport import Page
from lakegate_client.credentials import TableCredentials

__all__ = ["AsyncGrpcTransport", "SyncGrpcTransport"]

# Proxies from the environment never apply to a node-local gateway (and would leak the token).
# A local subchannel pool per channel: with gRPC's default global pool, a channel created in a
# forked child picks up the parent's live subchannel (same target and args) and fails with
# "Wrong file descriptor generation" -- exactly the cross-process reuse this client must avoid.
_CHANNEL_OPTIONS = (("grpc.enable_http_proxy", 0), ("grpc.use_local_subchannel_pool", 1))


def _create_request(
    ref: TableRef,
    format: str,
    base_location: str | None,
    doc: str | None,
    properties: Mapping[str, str] | None,
    idempotency_key: str,
) -> catalog_pb2.CreateTableRequest:
    return catalog_pb2.CreateTableRequest(
        table=ref.proto(),
        format=format,
        base_location=base_location or "",
        doc=doc or "",
        properties=dict(properties or {}),
        idempotency_key=idempotency_key,
    )


def _rename_request(source: TableRef, destination: TableRef) -> catalog_pb2.RenameTableRequest:
    return catalog_pb2.RenameTableRequest(
        warehouse=source.warehouse,
        source_namespace=list(source.namespace),
        source_name=source.name,
        destination_namespace=list(destination.namespace),
        destination_name=destination.name,
    )


class SyncGrpcTransport:
    """Blocking gRPC transport on one ``grpc.Channel`` (thread-safe)."""

    def __init__(self, config: ClientConfig) -> None:
        self._target = config.endpoint.grpc_target
        self._timeout_s = config.timeout_s
        self._auth = CallerAuth(config)
        self._channel = grpc.insecure_channel(self._target, options=_CHANNEL_OPTIONS)
        self._credentials = credentials_pb2_grpc.CredentialServiceStub(self._channel)  # type: ignore[no-untyped-call]
        self._catalog = catalog_pb2_grpc.CatalogServiceStub(self._channel)  # type: ignore[no-untyped-call]
        self._pid = os.getpid()

    @property
    def connection_id(self) -> str:
        """``<pid>:<id of the channel>``."""
        return f"{self._pid}:{id(self._channel):x}"

    def _call(self, method: Callable[..., Any], request: Any) -> Any:
        try:
            return method(request, timeout=self._timeout_s, metadata=self._auth.metadata())
        except grpc.RpcError as exc:
            raise _proto.error_from_grpc(
                exc.code(),
                exc.details(),
                _proto.trailing_pairs(exc),
                self._target,
            ) from exc

    def start(self, name: str, request: Any) -> Any:
        """Start ``"<credentials|catalog>.<Rpc>"`` without blocking; a ``grpc.Future``."""
        service, method = name.split(".")
        stub = self._credentials if service == "credentials" else self._catalog
        return getattr(stub, method).future(
            request, timeout=self._timeout_s, metadata=self._auth.metadata()
        )

    def credentials(self, ref: TableRef, access: Access) -> TableCredentials:
        """GetTableCredentials."""
        msg = self._call(
            self._credentials.GetTableCredentials, _proto.grpc_credentials_request(ref, access)
        )
        return _proto.credentials_from_proto(msg, ref, access)

    def load(self, ref: TableRef, vended: bool, access: Access) -> LoadedTable:
        """LoadTable."""
        request = catalog_pb2.LoadTableRequest(
            table=ref.proto(), vended=vended, access=_proto.access_proto(access)
        )
        return _proto.loaded_from_proto(
            self._call(self._catalog.LoadTable, request), ref, access, vended
        )

    def list_page(self, warehouse: str, namespace: tuple[str, ...], page_token: str | None) -> Page:
        """ListTables (one page)."""
        request = catalog_pb2.ListTablesRequest(
            warehouse=warehouse, namespace=list(namespace), page_token=page_token or ""
        )
        return _proto.identifiers_from_proto(self._call(self._catalog.ListTables, request))

    def create(
        self,
        ref: TableRef,
        format: str,
        base_location: str | None,
        doc: str | None,
        properties: Mapping[str, str] | None,
        idempotency_key: str,
    ) -> LoadedTable:
        """CreateTable."""
        request = _create_request(ref, format, base_location, doc, properties, idempotency_key)
        return _proto.loaded_from_proto(
            self._call(self._catalog.CreateTable, request), ref, "read", False
        )

    def drop(self, ref: TableRef, purge: bool, force: bool) -> None:
        """DropTable."""
        request = catalog_pb2.DropTableRequest(table=ref.proto(), purge=purge, force=force)
        self._call(self._catalog.DropTable, request)

    def rename(self, source: TableRef, destination: TableRef) -> None:
        """RenameTable."""
        self._call(self._catalog.RenameTable, _rename_request(source, destination))

    def close(self) -> None:
        """Close the channel."""
        self._channel.close()


class AsyncGrpcTransport:
    """Asyncio gRPC transport on the same (sync, fork-safe) channel, awaiting call futures.

    Why not grpc.aio: a grpc.aio channel is bound to one event loop, and grpc.aio does not survive
    ``fork()`` (measured: children of a process that had used grpc.aio hung or aborted in gRPC's
    poller in 60 of 90 forks). The sync channel's ``future()`` calls complete on gRPC's own
    threads; each result is handed to the awaiting loop with ``call_soon_threadsafe``, so this
    works from any loop, in any forked child, without a thread per call.
    """

    def __init__(self, config: ClientConfig) -> None:
        self._sync = SyncGrpcTransport(config)
        self._target = config.endpoint.grpc_target

    @property
    def connection_id(self) -> str:
        """``<pid>:<id of the channel>``."""
        return self._sync.connection_id

    async def _call(self, name: str, request: Any) -> Any:
        loop = asyncio.get_running_loop()
        waiter: asyncio.Future[Any] = loop.create_future()
        call = self._sync.start(name, request)

        def hand_over(done: Any) -> None:  # runs on a gRPC thread
            try:
                loop.call_soon_threadsafe(_settle, waiter, done)
            except RuntimeError:  # the loop is closed: nobody is waiting any more
                pass

        call.add_done_callback(hand_over)
        try:
            return await waiter
        except asyncio.CancelledError:
            call.cancel()  # the caller gave up: stop the RPC too
            raise
        except grpc.RpcError as exc:
            raise _proto.error_from_grpc(
                exc.code(), exc.details(), _proto.trailing_pairs(exc), self._target
            ) from exc

    async def credentials(self, ref: TableRef, access: Access) -> TableCredentials:
        """GetTableCredentials."""
        msg = await self._call(
            "credentials.GetTableCredentials", _proto.grpc_credentials_request(ref, access)
        )
        return _proto.credentials_from_proto(msg, ref, access)

    async def load(self, ref: TableRef, vended: bool, access: Access) -> LoadedTable:
        """LoadTable."""
        request = catalog_pb2.LoadTableRequest(
            table=ref.proto(), vended=vended, access=_proto.access_proto(access)
        )
        msg = await self._call("catalog.LoadTable", request)
        return _proto.loaded_from_proto(msg, ref, access, vended)

    async def list_page(
        self, warehouse: str, namespace: tuple[str, ...], page_token: str | None
    ) -> Page:
        """ListTables (one page)."""
        request = catalog_pb2.ListTablesRequest(
            warehouse=warehouse, namespace=list(namespace), page_token=page_token or ""
        )
        return _proto.identifiers_from_proto(await self._call("catalog.ListTables", request))

    async def create(
        self,
        ref: TableRef,
        format: str,
        base_location: str | None,
        doc: str | None,
        properties: Mapping[str, str] | None,
        idempotency_key: str,
    ) -> LoadedTable:
        """CreateTable."""
        request = _create_request(ref, format, base_location, doc, properties, idempotency_key)
        msg = await self._call("catalog.CreateTable", request)
        return _proto.loaded_from_proto(msg, ref, "read", False)

    async def drop(self, ref: TableRef, purge: bool, force: bool) -> None:
        """DropTable."""
        request = catalog_pb2.DropTableRequest(table=ref.proto(), purge=purge, force=force)
        await self._call("catalog.DropTable", request)

    async def rename(self, source: TableRef, destination: TableRef) -> None:
        """RenameTable."""
        await self._call("catalog.RenameTable", _rename_request(source, destination))

    async def aclose(self) -> None:
        """Close the channel."""
        self._sync.close()


def _settle(waiter: asyncio.Future[Any], call: Any) -> None:
    """Copy a finished gRPC call future into the asyncio future (on the loop's thread)."""
    if waiter.done():  # cancelled meanwhile
        return
    if call.cancelled():
        waiter.cancel()
        return
    error = call.exception()
    if error is not None:
        waiter.set_exception(error)
    else:
        waiter.set_result(call.result())
