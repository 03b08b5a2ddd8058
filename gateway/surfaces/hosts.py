"""The Host names a credential request may carry: loopback and the configured ones, over TCP.

Why: a browser page whose name an attacker re-points at 127.0.0.1 (DNS rebinding) reaches the
gateway as "same origin", with its own name in `Host`. Accepting only loopback names and the
names the operator configured (the node-local Service) refuses those requests, as the EKS Pod
Identity Agent and the GKE metadata server do. Checked on every admitted request over TCP. Over
the Unix socket no browser can connect and no name resolves to it, so any well-formed Host is
accepted there: UDS clients send whatever their URL gives (the previous `lakegate_client` sends
`Host: lakegate`, `requests-unixsocket` the percent-encoded socket path), and a gateway upgrade
must not break a client of the previous release (docs/contracts.md). The ops endpoints
(`/livez`, `/readyz`, `/metrics`), which kubelet and Prometheus ask by pod IP, carry no
credentials and are not admitted, so they take any Host.
"""

from __future__ import annotations

import ipaddress
import re
import socket
from collections.abc import Iterable
from typing import Any

from gateway.surfaces.memo import BoundedLru

LOOPBACK_NAMES = frozenset({"localhost"})
_MEMO_SIZE = 256  # distinct Host values remembered; hostile ones only cost a re-parse
_PORT = re.compile(r":[0-9]{1,5}")
_VISIBLE = re.compile(r"[\x21-\x7e]{1,255}")


def well_formed(host: str | None) -> bool:
    """A present `Host` of visible ASCII (at most 255 characters) that parses as
    `name[:port]` or `[v6][:port]` (a percent-encoded socket path is such a name)."""
    if not host or _VISIBLE.fullmatch(host) is None:
        return False
    return bool(host_name(host))


def over_unix_socket(transport: Any) -> bool:
    """Whether a request's connection is on a Unix socket (where DNS rebinding cannot reach)."""
    sock = None if transport is None else transport.get_extra_info("socket")
    return sock is not None and sock.family == socket.AF_UNIX


def host_name(host: str) -> str | None:
    """The name or address of a `Host` header value without its port (lower-cased, no final
    dot), or None when the value is not a well-formed `host[:port]` / `[v6][:port]`."""
    if host.startswith("["):
        end = host.find("]")
        if end < 0 or (host[end + 1:] and not _PORT.fullmatch(host[end + 1:])):
            return None
        return host[1:end].lower()
    name, sep, port = host.partition(":")
    if sep and not _PORT.fullmatch(sep + port):
        return None
    name = name.lower()
    return name[:-1] if name.endswith(".") else name


class HostAllowList:
    """Loopback addresses (127.0.0.0/8, ::1), `localhost` and the configured names.

    Args:
        names: extra exact names (e.g. `lakegate-local.lakegate.svc.cluster.local`); blanks
            are ignored (`LISTEN__ALLOWED_HOSTS` split at commas).
    """

    def __init__(self, names: Iterable[str] = ()) -> None:
        self.names = LOOPBACK_NAMES | {n.strip().lower().rstrip(".") for n in names if n.strip()}
        self._memo: BoundedLru[str, bool] = BoundedLru(_MEMO_SIZE)

    def allows(self, host: str | None) -> bool:
        """Whether a request with this `Host` header (None: absent) may be admitted."""
        if not host:
            return False
        known = self._memo.get(host)
        if known is None:
            known = self._decide(host)
            self._memo.put(host, known)
        return known

    def _decide(self, host: str) -> bool:
        name = host_name(host)
        if not name:
            return False
        if name in self.names:
            return True
        try:
            return ipaddress.ip_address(name).is_loopback
        except ValueError:
            return False
