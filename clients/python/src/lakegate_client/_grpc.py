"""gRPC transports (sync, and asyncio over the same sync channel) for ``lakegate.v1``.

A channel is made by the client facade once per process: gRPC channels hold background threads
and sockets that do not survive ``fork()``, so a child must never touch its parent's channel (not
even to close it, which could shut down the parent's shared socket). Every call carries a
deadline and the caller's authentication metadata.
"""

from __future__ import annotations

import asyncio
import os
from typing import Any, TypeVar

import grpc

from lakegate.v1 import catalog_pb2_grpc, credentials_pb2_grpc
from lakegate_client import _proto
from lakegate_client._auth import CallerAuth
from lakegate_client._config import ClientConfig
from lakegate_client._errors import LakegateError
from lakegate_client._ops import Operation

__all__ = ["AsyncGrpcTransport", "SyncGrpcTransport"]

R = TypeVar("R")

# Proxies from the environment never apply to a node-local gateway (and would leak the token).
# A local subchannel pool per channel: with gRPC's default global pool, a channel created in a
# forked child picks up the parent's live subchannel (same target and args) and fails with
# "Wrong file descriptor generation" -- exactly the cross-process reuse this client must avoid.
_CHANNEL_OPTIONS = (("grpc.enable_http_proxy", 0), ("grpc.use_local_subchannel_pool", 1))


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

    def _stub(self, name: str) -> Any:
        service, method = name.split(".")
        stub = self._credentials if service == "credentials" else self._catalog
        return getattr(stub, method)

    def translate(self, exc: grpc.RpcError) -> LakegateError:
        return _proto.error_from_grpc(
            exc.code(), exc.details(), _proto.trailing_pairs(exc), self._target
        )

    def start(self, name: str, request: Any) -> Any:
        """Start ``"<credentials|catalog>.<Rpc>"`` without blocking; a ``grpc.Future``."""
        return self._stub(name).future(
            request, timeout=self._timeout_s, metadata=self._auth.metadata()
        )

    def send(self, op: Operation[R]) -> R:
        """Call the operation's RPC with a deadline and decode the reply."""
        try:
            msg = self._stub(op.rpc)(
                op.grpc(), timeout=self._timeout_s, metadata=self._auth.metadata()
            )
        except grpc.RpcError as exc:
            raise self.translate(exc) from exc
        return op.from_proto(msg)

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
            raise self._sync.translate(exc) from exc

    async def send(self, op: Operation[R]) -> R:
        """Call the operation's RPC and decode the reply."""
        return op.from_proto(await self._call(op.rpc, op.grpc()))

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
