"""The other end of a connection, for limits that apply before (or without) a known caller.

Why: the per-caller rate limit needs a caller, so bad tokens were never limited (3,000 got 401 in
1.2 s, each paying a verification), and in caller mode `none` every process shared one
`anonymous` bucket. Over a Unix socket the kernel names the peer (SO_PEERCRED: the connecting
process's pid, uid and gid): failed authentication is limited per uid, anonymous requests per
uid and pid. Over TCP the peer is the connection (address and port): on loopback every process
has the same address, so a per-address bucket would let one process lock out all others. gRPC
exposes no peer credentials, so its peer is the `context.peer()` string (the connection on TCP,
the socket on UDS).
"""

from __future__ import annotations

import socket
import struct
from dataclasses import dataclass
from typing import Any

from cachetools import LRUCache

from gateway.clock import Clock
from gateway.concurrency import TokenBucket
from gateway.errors import RateLimitedCallerError

_UCRED = struct.Struct("3i")  # struct ucred: pid, uid, gid


@dataclass(frozen=True)
class Peer:
    """Bucket keys of one peer: for failed authentication, and for anonymous callers."""

    auth_key: str
    caller_key: str


UNKNOWN = Peer("unknown", "unknown")


def socket_peer(sock: Any, peername: Any) -> Peer:
    """The peer of an accepted socket (`sock` may be asyncio's TransportSocket)."""
    if sock is not None and sock.family == socket.AF_UNIX and hasattr(socket, "SO_PEERCRED"):
        try:
            pid, uid, _ = _UCRED.unpack(
                sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _UCRED.size))
        except OSError:
            return UNKNOWN
        return Peer(f"uid:{uid}", f"uid:{uid}/pid:{pid}")
    if isinstance(peername, tuple) and len(peername) >= 2:
        key = f"tcp:{peername[0]}:{peername[1]}"
        return Peer(key, key)
    return UNKNOWN


class LazyPeer:
    """The peer of an aiohttp request's transport, looked up once and only when a limit asks
    (one getsockopt); steady-state requests never need it."""

    __slots__ = ("_peer", "_transport")

    def __init__(self, transport: Any) -> None:
        self._transport = transport
        self._peer: Peer | None = None

    def __call__(self) -> Peer:
        if self._peer is None:
            t = self._transport
            self._peer = UNKNOWN if t is None else socket_peer(
                t.get_extra_info("socket"), t.get_extra_info("peername"))
        return self._peer


class GrpcPeer:
    """A gRPC call's peer (`context.peer()`, asked only when a limit needs it)."""

    __slots__ = ("_context", "_peer")

    def __init__(self, context: Any) -> None:
        self._context = context
        self._peer: Peer | None = None

    def __call__(self) -> Peer:
        if self._peer is None:
            key = str(self._context.peer() or "unknown")
            self._peer = Peer(key, key)
        return self._peer


class AuthFailureLimiter:
    """Failed authentications per peer: `rate_per_s` a second, `burst` at most. A peer whose
    bucket is empty is refused (429) before its token is even looked at.

    Args:
        rate_per_s: failures a second a peer regains.
        burst: failures a peer may make in a row.
        clock: the monotonic clock.
        max_peers: bucket bound (LRU).
    """

    def __init__(self, rate_per_s: float, burst: int, clock: Clock,
                 max_peers: int = 10_000) -> None:
        self._rate = rate_per_s
        self._burst = float(burst)
        self._clock = clock
        self._buckets: LRUCache[str, TokenBucket] = LRUCache(max_peers)

    @property
    def active(self) -> bool:
        """Whether any peer has failed lately (else the peer need not be looked up)."""
        return bool(self._buckets)

    def check(self, key: str) -> None:
        """Refuse a peer that has used up its failures.

        Raises:
            RateLimitedCallerError: with the seconds until it may try again.
        """
        bucket = self._buckets.get(key)
        if bucket is None:
            return
        wait = bucket.wait_s_now()
        if wait > 0:
            raise RateLimitedCallerError("too many failed authentications from this peer",
                                         retry_after_s=wait)

    def failed(self, key: str) -> None:
        """Count one failed authentication of the peer."""
        bucket = self._buckets.get(key)
        if bucket is None:
            bucket = self._buckets[key] = TokenBucket(self._rate, self._clock, self._burst)
        bucket.try_acquire()
