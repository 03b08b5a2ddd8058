"""The two transport interfaces the client facades drive (HTTP and gRPC implement both).

A transport has one ``send(op)``: the operation (``_ops.py``) encodes its own request and decodes
its own answer, so a transport only moves bytes and maps transport failures to ``LakegateError``.
``connection_id`` names the underlying channel/connection pool and the pid that created it, so
tests can prove a forked child never reuses its parent's.
"""

from __future__ import annotations

from typing import Protocol, TypeVar

from lakegate_client._ops import Operation

__all__ = ["AsyncTransport", "SyncTransport"]

R = TypeVar("R")


class SyncTransport(Protocol):
    """Blocking transport."""

    @property
    def connection_id(self) -> str:
        """``<pid>:<id of the channel or connection pool>``."""
        ...

    def send(self, op: Operation[R]) -> R:
        """Send one operation and return its decoded answer."""
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

    async def send(self, op: Operation[R]) -> R:
        """Send one operation and return its decoded answer."""
        ...

    async def aclose(self) -> None:
        """Release the channel or session."""
        ...
