"""Listening sockets of the daemon: TCP binds and Unix sockets (mode 0660, stale files replaced).

Split out of gateway/app.py so the App keeps to its lifecycle. A stale socket file (a crashed
daemon's) is replaced only when nothing listens on it; a live one or a regular file is refused.
"""

from __future__ import annotations

import os
import socket
import stat
from pathlib import Path


class StartupError(Exception):
    """The daemon cannot start (bind failure, unusable caller config); exit code 1."""


def uds_socket(path: Path, setting: str) -> socket.socket:
    """Bind a UDS at `path` (mode 0660), replacing a stale socket file safely.

    Raises:
        StartupError: something else lives at `path`, or a live server already listens there.
    """
    try:
        clear_stale_uds(path)
    except StartupError as exc:
        raise StartupError(f"{setting}: {exc}") from exc
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.bind(str(path))
        os.chmod(path, 0o660)
    except OSError as exc:
        sock.close()
        raise StartupError(f"{setting}: cannot bind unix socket {path}: {exc.strerror}") from exc
    return sock


def clear_stale_uds(path: Path) -> None:
    try:
        mode = path.lstat().st_mode
    except FileNotFoundError:
        path.parent.mkdir(parents=True, exist_ok=True)
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
