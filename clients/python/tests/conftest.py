"""Fixtures for the client's own tests (never imports the gateway daemon).

``fake_gateway`` runs tests/fake_gateway_server.py in a subprocess (HTTP + gRPC, TCP + UDS) and
stops it by pid; ``fake_clock`` is a settable wall clock.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

SERVER = Path(__file__).with_name("fake_gateway_server.py")


class FakeClock:
    """Wall clock that only moves when told to."""

    def __init__(self, now: float = 1_800_000_000.0) -> None:
        self.t = now

    def now(self) -> float:
        return self.t

    def monotonic(self) -> float:
        return self.t

    def advance(self, seconds: float) -> None:
        self.t += seconds


@dataclass(frozen=True)
class FakeGateway:
    """Addresses of the running fake gateway."""

    http_url: str
    http_uds: str
    grpc_target: str
    grpc_uds: str
    pid: int

    @property
    def urls(self) -> dict[str, str]:
        """One client URL per transport form."""
        return {
            "http": self.http_url,
            "http+uds": f"unix:{self.http_uds}",
            "grpc": f"grpc://{self.grpc_target}",
            "grpc+uds": f"grpc+unix:{self.grpc_uds}",
        }

    def stats(self) -> dict[str, Any]:
        """Call counters and the last caller headers the fake saw."""
        with httpx.Client(trust_env=False, timeout=5) as client:
            return client.get(f"{self.http_url}/_fake/stats").json()  # type: ignore[no-any-return]

    def replace(self, table: str) -> None:
        """Drop and create ``table`` again behind every client's back: a new location."""
        with httpx.Client(trust_env=False, timeout=5) as client:
            resp = client.post(f"{self.http_url}/_fake/replace", params={"table": table})
            resp.raise_for_status()


@pytest.fixture
def fake_clock() -> FakeClock:
    return FakeClock()


@pytest.fixture(scope="session")
def fake_gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[FakeGateway]:
    # Short socket paths: AF_UNIX paths are limited to ~107 bytes.
    run_dir = Path(tmp_path_factory.mktemp("fgw"))
    log = open(run_dir / "server.log", "wb")
    proc = subprocess.Popen(
        [sys.executable, str(SERVER), "--run-dir", str(run_dir)],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    ready = run_dir / "ready.json"
    try:
        deadline = time.monotonic() + 30
        while not ready.exists():
            if proc.poll() is not None or time.monotonic() > deadline:
                log.flush()
                raise RuntimeError(
                    "fake gateway did not start: " + (run_dir / "server.log").read_text()[-2000:]
                )
            time.sleep(0.05)
        yield FakeGateway(**json.loads(ready.read_text()))
    finally:
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.kill(proc.pid, signal.SIGKILL)
                proc.wait(timeout=10)
        log.close()
