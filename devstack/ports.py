"""Free loopback TCP ports for the stack's listeners."""

from __future__ import annotations

import socket


def free_ports(count: int) -> list[int]:
    """Return `count` distinct free ports on 127.0.0.1.

    All sockets are held open until every port is chosen, so the list has no duplicates; a
    port can still be taken by someone else before the server binds it (accepted for tests).
    """
    socks: list[socket.socket] = []
    try:
        for _ in range(count):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind(("127.0.0.1", 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def free_port() -> int:
    """One free port on 127.0.0.1."""
    return free_ports(1)[0]
