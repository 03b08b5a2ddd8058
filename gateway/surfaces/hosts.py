"""The Host names a credential request may carry: loopback and the configured ones.

Why: a browser page whose name an attacker re-points at 127.0.0.1 (DNS rebinding) reaches the
gateway as "same origin", with its own name in `Host`. Accepting only loopback names and the
names the operator configured (the node-local Service) refuses those requests, as the EKS Pod
Identity Agent and the GKE metadata server do. Checked on every admitted request, over UDS too
(clients send `Host: localhost` there); the ops endpoints (`/livez`, `/readyz`, `/metrics`),
which kubelet and Prometheus ask by pod IP, carry no credentials and are not admitted, so they
take any Host.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterable

from gateway.surfaces.memo import BoundedLru

LOOPBACK_NAMES = frozenset({"localhost"})
_MEMO_SIZE = 256  # distinct Host values remembered; hostile ones only cost a re-parse
_PORT = re.compile(r":[0-9]{1,5}")


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
