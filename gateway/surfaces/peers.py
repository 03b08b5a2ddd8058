"""The other end of a connection, and the failed-authentication limits keyed on it.

Why: the per-caller rate limit needs a caller, so bad tokens were never limited (3,000 got 401 in
1.2 s, each paying a verification), and in caller mode `none` every process shared one
`anonymous` bucket. Over a Unix socket the kernel names the peer (SO_PEERCRED: the connecting
process's pid, uid and gid): failed authentication is counted per uid, anonymous requests per
uid and pid. Over TCP failed authentication is counted per remote address (a bad-token loop
cannot escape it by reconnecting), anonymous requests per connection (address and port, as
docs/contracts.md says: every local process connects from 127.0.0.1, so the address alone
would put them all in one bucket). gRPC exposes no peer credentials: its peer is
`context.peer()` (with the port for the connection's key); a Unix-socket client has no address
at all (`unix:`), so every one of them is the one `unix` peer (docs/contracts.md says so).

A peer is shared by many callers (every process of a uid, every pod behind one address, every
gRPC client on the socket), so a peer's failures must never cost a caller whose token verifies
(issue #35: a neighbour's bad tokens gave valid callers RESOURCE_EXHAUSTED). `AuthFailures`
therefore keys failures twice: per credential presented (a SHA-256 of the token, never the
token), which refuses a failing token before it is verified again, and per peer, which only
turns a failing request's 401 into a 429; a request whose token verifies is admitted whatever
its peer did.
"""

from __future__ import annotations

import hashlib
import socket
import struct
from dataclasses import dataclass
from typing import Any

from cachetools import LRUCache

from gateway.clock import Clock
from gateway.concurrency import TokenBucket
from gateway.errors import RateLimitedCallerError
from gateway.surfaces.hosts import over_unix_socket

_UCRED = struct.Struct("3i")  # struct ucred: pid, uid, gid
MAX_DELAYED = 1024  # refused requests held at once (AuthFailures.hold)


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
        # Failures by address; an anonymous caller is its connection (the port names it).
        return Peer(f"tcp:{peername[0]}", f"tcp:{peername[0]}:{peername[1]}")
    return UNKNOWN


def grpc_peer_key(peer: str) -> str:
    """`context.peer()` without the port: `ipv4:127.0.0.1:5555` → `ipv4:127.0.0.1`,
    `ipv6:[::1]:5555` → `ipv6:[::1]`, any `unix:...` → `unix`."""
    kind, _, rest = peer.partition(":")
    if kind == "unix" or kind == "unix-abstract":
        return "unix"
    if kind in ("ipv4", "ipv6") and rest:
        host, sep, port = rest.rpartition(":")
        return f"{kind}:{host}" if sep and port.isdigit() else peer
    return peer or "unknown"


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

    def caller_key(self) -> str:
        """The key of an anonymous caller on this connection (RequestContext.peer_key)."""
        return self().caller_key

    def on_unix_socket(self) -> bool:
        """Whether the connection is on a Unix socket (the gate asks only for a Host it does
        not allow; one object per request answers both questions)."""
        return over_unix_socket(self._transport)


class GrpcPeer:
    """A gRPC call's peer (`context.peer()` without the port, asked only when a limit needs
    it)."""

    __slots__ = ("_context", "_peer")

    def __init__(self, context: Any) -> None:
        self._context = context
        self._peer: Peer | None = None

    def __call__(self) -> Peer:
        if self._peer is None:
            peer = str(self._context.peer() or "")
            key = grpc_peer_key(peer)
            # An anonymous caller is its connection (the port kept), as over HTTP.
            self._peer = Peer(key, peer if key.startswith(("ipv4:", "ipv6:")) else key)
        return self._peer

    def caller_key(self) -> str:
        """The key of an anonymous caller on this call's connection (RequestContext.peer_key)."""
        return self().caller_key


def credential_key(token: str) -> str:
    """The key of a presented credential in the failure buckets: its SHA-256, never the token."""
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


class _Buckets:
    """Failure token buckets by key (LRU-bounded)."""

    __slots__ = ("_buckets", "_burst", "_clock", "_rate")

    def __init__(self, rate_per_s: float, burst: int, clock: Clock, max_keys: int) -> None:
        self._rate = rate_per_s
        self._burst = float(burst)
        self._clock = clock
        self._buckets: LRUCache[str, TokenBucket] = LRUCache(max_keys)

    def __bool__(self) -> bool:
        return bool(self._buckets)

    def wait_s(self, key: str) -> float:
        bucket = self._buckets.get(key)
        return 0.0 if bucket is None else bucket.wait_s_now()

    def failed(self, key: str) -> None:
        bucket = self._buckets.get(key)
        if bucket is None:
            bucket = self._buckets[key] = TokenBucket(self._rate, self._clock, self._burst)
        bucket.try_acquire()

    def clear(self) -> None:
        self._buckets.clear()


class AuthFailures:
    """Failed authentications per credential presented and per peer: `rate_per_s` a second,
    `burst` at most, for each key.

    - A credential whose bucket is empty is refused (429) before it is verified again: only
      who presents that very token pays for its failures.
    - A peer whose bucket is empty gets 429 instead of 401 for its failing requests (a signal to
      back off, and a metric); its requests are still authenticated, and one whose token
      verifies is admitted: a peer is shared, its failures are not a caller's.

    Args:
        rate_per_s: failures a second a key regains.
        burst: failures a key may make in a row.
        clock: the monotonic clock.
        max_keys: bucket bound per kind (LRU).
        delay_s: the longest a refused request is held before its 429 (`hold`).
        max_delayed: refused requests held at once.
    """

    def __init__(self, rate_per_s: float, burst: int, clock: Clock,
                 max_keys: int = 10_000, *, delay_s: float = 0.0,
                 max_delayed: int = MAX_DELAYED) -> None:
        self._credentials = _Buckets(rate_per_s, burst, clock, max_keys)
        self._peers = _Buckets(rate_per_s, burst, clock, max_keys)
        self._clock = clock
        self._delay_s = delay_s
        self._max_delayed = max_delayed
        self._delayed = 0
        # Whether anything failed lately (else no key need be computed): a plain attribute,
        # read on every admitted request; set by `failed`, recounted by `forget_credentials`
        # (failure buckets leave only by LRU eviction or that clear).
        self.active = False

    async def hold(self, retry_after_s: float) -> None:
        """Hold a refused request before its 429, at most `delay_s` (and no longer than its
        Retry-After), so a flood runs at the pace of its connections, not of the event loop:
        measured, one process flooding one gRPC connection doubled a valid neighbour's p99
        until its refusals were held. At most `max_delayed` requests wait at once; past that a
        refusal is answered at once (a wait must not be a way to hold the daemon's memory).
        """
        wait = min(self._delay_s, retry_after_s)
        if wait <= 0 or self._delayed >= self._max_delayed:
            return
        self._delayed += 1
        try:
            await self._clock.sleep(wait)
        finally:
            self._delayed -= 1

    def check_credential(self, key: str) -> None:
        """Refuse a credential that has used up its failures.

        Raises:
            RateLimitedCallerError: with the seconds until it may be tried again.
        """
        wait = self._credentials.wait_s(key)
        if wait > 0:
            raise RateLimitedCallerError("too many failed authentications with this credential",
                                         retry_after_s=wait)

    def peer_wait_s(self, key: str) -> float:
        """Seconds until the peer regains a failure (0: it has failures left)."""
        return self._peers.wait_s(key)

    def failed(self, credential: str | None, peer: str | None) -> None:
        """Count one failed authentication of the credential (None: none was presented) and of
        the peer (None: unknown)."""
        if credential is not None:
            self._credentials.failed(credential)
            self.active = True
        if peer is not None:
            self._peers.failed(peer)
            self.active = True

    def forget_credentials(self) -> None:
        """Drop the credential buckets (a reload may have made a failing token valid)."""
        self._credentials.clear()
        self.active = bool(self._peers)
