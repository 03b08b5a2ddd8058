"""fake-gcs-server (the real binary) behind the real token-checking layer, without the rest of
the stack: for tests of the GCS stand-in itself and of the client's GCS store."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import pytest


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
