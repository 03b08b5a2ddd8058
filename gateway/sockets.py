"""Listening sockets of the daemon: TCP binds and Unix sockets (mode 0660, stale files replaced).

Split out of gateway/app.py so the App keeps to its lifecycle. A stale socket file (a crashed
daemon's) is replaced only when nothing listens on it; a live one or a regular file is refused.

Modes (issue #28): a socket is created under umask 0177 (born 0600, so no other user can
connect before it is opened to the group with 0660), a socket directory the gateway creates is
0750, and a directory every user may write but the gateway does not own is refused: another user
could unlink the socket and listen in its place, collecting callers' bearer tokens.
"""

from __future__ import annotations

import os
import socket
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

SOCKET_MODE = 0o660
DIR_MODE = 0o750
_BIND_UMASK = 0o177


@contextmanager
def private_umask() -> Iterator[None]:
    """Files created meanwhile are owner-only (umask 0177). The umask is process-wide: used
    around start-up binds only, before any request is served."""
    old = os.umask(_BIND_UMASK)
    try:
        yield
    finally:
        os.umask(old)


def open_to_group(path: Path) -> None:
    """Give a bound socket its serving mode, 0660 (owner and group may connect)."""
    os.chmod(path, SOCKET_MODE)


def socket_dir(path: Path) -> None:
    """Create the socket's directory (0750), or check that the existing one is safe.

    Raises:
        StartupError: the directory is writable by every user and owned by another.
    """
    parent = path.parent
    try:
        st = parent.stat()
    except FileNotFoundError:
        parent.mkdir(parents=True, mode=DIR_MODE, exist_ok=True)
        os.chmod(parent, DIR_MODE)  # mkdir's mode is masked by the umask
        return
    if st.st_mode & stat.S_IWOTH and st.st_uid != os.geteuid():
        raise StartupError(
            f"{parent} is writable by every user and owned by uid {st.st_uid}, not the gateway: "
            "another user could replace the socket; use a directory the gateway's user owns "
            f"(mode {DIR_MODE:o})")


class StartupError(Exception):
    """The daemon cannot start (bind failure, unusable caller config); exit code 1."""


def uds_socket(path: Path, setting: str) -> socket.socket:
    """Bind a UDS at `path` (born 0600, then 0660), replacing a stale socket file safely.

    Raises:
        StartupError: something else lives at `path`, or a live server already listens there.
    """
    try:
        clear_stale_uds(path)
    except StartupError as exc:
        raise StartupError(f"{setting}: {exc}") from exc
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        with private_umask():
            sock.bind(str(path))
        open_to_group(path)
    except OSError as exc:
        sock.close()
        raise StartupError(f"{setting}: cannot bind unix socket {path}: {exc.strerror}") from exc
    return sock


def clear_stale_uds(path: Path) -> None:
    """Make `path` free for a new socket: its directory safe (`socket_dir`), a stale socket gone.

    Raises:
        StartupError: an unsafe directory, a non-socket at `path`, or a live server there.
    """
    socket_dir(path)
    try:
        mode = path.lstat().st_mode
    except FileNotFoundError:
        return
    if not stat.S_ISSOCK(mode):
        raise StartupError(f"{path} exists and is not a socket; refusing to replace it")
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        probe.connect(str(path))
    except (ConnectionRefusedError, FileNotFoundError):
        path.unlink(missing_ok=True)  # nobody listens: a leftover of a crashed daemon
        return
    finally:
        probe.close()
    raise StartupError(f"another server is listening on {path}")


def tcp_socket(host: str, port: int, setting: str) -> socket.socket:
    """A bound TCP socket; a failure names the setting (`setting`) that chose the port."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise StartupError(f"{setting}: cannot bind {host}:{port}: {exc.strerror}") from exc
    return sock
