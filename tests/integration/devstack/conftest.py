"""Helpers shared by the local-stack integration tests (HTTP clients bound to `bare_stack`)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest

from devstack.bootstrap import fetch_token
from devstack.hooks import EmulatorHooks
from devstack.launcher import Stack
from tests.stack_fixtures import clean_emulator


@dataclass
class Catalog:
    """Raw HTTP access to the emulator as client `direct` (or any bearer token)."""

    stack: Stack
    http: httpx.Client
    token: str

    @property
    def wh(self) -> str:
        return self.stack.info.warehouse.id

    @property
    def ns(self) -> str:
        return self.stack.info.namespace

    def tables_path(self, ns: str | None = None) -> str:
        return f"/lakekeeper/v1/{self.wh}/namespaces/{ns or self.ns}/generic-tables"

    def create(self, name: str, ns: str | None = None, **body: Any) -> httpx.Response:
        return self.http.post(self.tables_path(ns), json={"name": name, "format": "lance", **body})


def token_for(stack: Stack, client: str) -> str:
    c = stack.info.idp.clients[client]
    return fetch_token(stack.info.idp.token_url, c.id, c.secret)


@pytest.fixture
def catalog(bare_stack: Stack) -> Iterator[Catalog]:
    token = token_for(bare_stack, "direct")
    with httpx.Client(
        base_url=bare_stack.info.catalog.url,
        headers={"Authorization": f"Bearer {token}"},
        timeout=30,
    ) as http:
        yield Catalog(bare_stack, http, token)


@pytest.fixture
def hooks(bare_stack: Stack) -> Iterator[EmulatorHooks]:
    yield from clean_emulator(bare_stack)


@dataclass
class LocalGcs:
    """fake-gcs-server (`server`: its own JSON API, no credentials) and the token-checking
    layer in front of it (`guard`), with bucket `bucket` and a signing key to mint tokens."""

    server: str
    guard: str
    bucket: str
    key: bytes

    def token(self, prefix: str, role: str = "write") -> str:
        from devstack.emulator.gcs_tokens import TokenGrant, mint

        grant = TokenGrant(self.bucket, prefix, role, 4_000_000_000_000)  # type: ignore[arg-type]
        return mint(grant, self.key)


@pytest.fixture(scope="module")
def local_gcs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalGcs]:
    """The real fake-gcs-server binary behind the real guard (no catalog, no gateway)."""
    import sys

    from devstack import fake_gcs, processes
    from devstack.ports import free_ports
    from devstack.readiness import port_open

    run = tmp_path_factory.mktemp("gcs")
    server_port, guard_port = free_ports(2)
    server_proc = processes.spawn("gcs", fake_gcs.server_argv(server_port, guard_port),
                                  log_path=run / "gcs.log")  # fmt: skip
    guard_proc = None
    try:
        processes.wait_until(server_proc, lambda: port_open("127.0.0.1", server_port),
                             timeout_s=20, what="fake-gcs-server", interval_s=0.1)  # fmt: skip
        server = f"http://127.0.0.1:{server_port}"
        fake_gcs.create_bucket(server, "bkt")
        account = fake_gcs.service_account()
        config = run / "guard.json"
        fake_gcs.write_guard_config(config, port=guard_port, upstream=server, accounts=[account])
        guard_proc = processes.spawn(
            "gcs-guard", [sys.executable, "-m", "devstack.gcs_guard", "--config", str(config)],
            log_path=run / "guard.log",
        )  # fmt: skip
        guard = f"http://127.0.0.1:{guard_port}"
        processes.wait_until(guard_proc, lambda: fake_gcs.guard_ready(guard), timeout_s=20,
                             what="GCS guard", interval_s=0.1)  # fmt: skip
        from devstack.emulator.gcs_tokens import signing_key

        yield LocalGcs(server, guard, "bkt", signing_key(account["private_key"]))
    finally:
        for proc in (guard_proc, server_proc):
            if proc is not None:
                processes.stop(proc)
