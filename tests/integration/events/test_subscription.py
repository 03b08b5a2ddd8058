"""The change events subscription's health against a real nats-server: a half-open connection
is noticed within seconds, messages the client drops count as lost events, a subscribe
permission violation marks the subscription down, TLS with a CA file and a client certificate,
and a warning for a password over plaintext nats://."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import secrets
import time
from collections.abc import Callable
from pathlib import Path

import nats
import nkeys
import pytest

from tests.integration.events.conftest import SUBJECT, EventsCore, NatsServer, wait_for
from tests.unit.tls_certs import self_signed

pytestmark = pytest.mark.integration

# Default ping interval 2 s, 2 outstanding pings: noticed after at most 3 intervals.
HALF_OPEN_BOUND_S = 6.0 + 3.0


def drop_event(warehouse_id: str, name: str) -> bytes:
    return json.dumps({"specversion": "1.0", "id": "x", "type": "dropGenericTable",
                       "source": "s", "datacontenttype": "application/json", "data": None,
                       "tabular-type": "GenericTable", "tabular-id": "tid",
                       "warehouse-id": warehouse_id, "name": name, "namespace": "ns",
                       "prefix": warehouse_id, "num-events": 1, "sequence-number": 0,
                       "trace-id": "t", "actor": "{}"}).encode()


async def test_a_half_open_connection_is_noticed_within_seconds(
    nats_server: Callable[..., NatsServer], events_core: Callable[..., EventsCore]
) -> None:
    server = nats_server()
    node = events_core(server.url)
    await node.core.start()
    await wait_for(lambda: node.up() == 1, 10)
    server.pause()  # the socket stays open; no PONG comes back (nats-py's default: 6 min)
    try:
        took = await wait_for(lambda: node.up() == 0, HALF_OPEN_BOUND_S + 5)
        assert took <= HALF_OPEN_BOUND_S, took
        assert node.core.service.identity.ttl_s == node.settings.cache.identity_ttl_s
        assert "change events subscription lost" in (await node.core.service.readiness())[1]
    finally:
        server.resume()
    subscription = node.core.events
    assert subscription is not None
    await wait_for(lambda: subscription.up, 15)  # reconnected and subscribed again...
    # ...but what was published during the gap is lost (issue 50 item 8): the short TTL holds
    # until the gap's window has passed (a fake clock: it passes when the test says so).
    assert node.up() == 0
    assert node.core.service.identity.ttl_s == node.settings.cache.identity_ttl_s
    assert "resynchronising" in (await node.core.service.readiness())[1]
    node.clock.advance(node.settings.cache.identity_ttl_s + node.settings.upstream.deadline_s + 1)
    await wait_for(lambda: node.up() == 1, 5)
    assert node.core.service.identity.ttl_s == node.settings.events.identity_ttl_s


async def test_messages_the_client_drops_count_as_lost_events(
    nats_server: Callable[..., NatsServer], events_core: Callable[..., EventsCore]
) -> None:
    server = nats_server()
    node = events_core(server.url, EVENTS__MAX_PENDING_EVENTS="10")
    await node.core.start()
    await wait_for(lambda: node.up() == 1, 10)
    publisher = await nats.connect(server.url)
    try:
        for i in range(500):
            await publisher.publish(SUBJECT, drop_event(node.catalog.warehouse_id, f"t{i}"))
        await publisher.flush(timeout=10)
        time.sleep(0.5)  # noqa: ASYNC251 - the consumer falls behind: its loop is busy
        await wait_for(lambda: sum(node.counted(r) for r in ("applied", "dropped")) >= 500, 20)
    finally:
        await publisher.close()
    assert node.counted("dropped") > 0
    # Dropped events are lost ones: `up` false, the short TTL until resynchronised.
    assert node.up() == 0
    assert node.core.service.identity.ttl_s == node.settings.cache.identity_ttl_s
    assert "change events lost, resynchronising" in (await node.core.service.readiness())[1]


async def test_a_subscribe_permission_violation_marks_the_subscription_down(
    nats_server: Callable[..., NatsServer], events_core: Callable[..., EventsCore],
    caplog: pytest.LogCaptureFixture
) -> None:
    password = secrets.token_hex(8)  # random per run: no constant secret in the source
    server = nats_server('authorization { users = [\n'
                         f'  {{user: gw, password: "{password}", permissions: '
                         '{subscribe: {deny: "lakekeeper.>"}}}\n]}')
    node = events_core(server.url, EVENTS__NATS_USER="gw", EVENTS__NATS_PASSWORD=password)
    caplog.set_level(logging.INFO, logger="gateway.upstream.events")
    await node.core.start()
    await wait_for(lambda: any("refused the change events subscription" in r.getMessage()
                               for r in caplog.records), 10)
    await asyncio.sleep(1.0)  # retried with backoff, never up
    assert node.up() == 0
    assert not any("subscribed to the catalog's change events" in r.getMessage()
                   for r in caplog.records)
    assert node.core.service.identity.ttl_s == node.settings.cache.identity_ttl_s
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert any("plaintext" in w for w in warnings)  # a password over nats://
    assert not any(password in w for w in warnings)


async def test_tls_with_a_ca_file_and_a_client_certificate(
    nats_server: Callable[..., NatsServer], events_core: Callable[..., EventsCore],
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    server_cert, server_key = self_signed(tmp_path, "server")
    client_cert, client_key = self_signed(tmp_path, "client")
    server = nats_server(f'tls {{\n  cert_file: "{server_cert}"\n  key_file: "{server_key}"\n'
                         f'  ca_file: "{client_cert}"\n  verify: true\n}}')
    url = server.url.replace("nats://", "tls://")
    node = events_core(url, EVENTS__NATS_TLS_CA_FILE=str(server_cert),
                       EVENTS__NATS_TLS_CERT_FILE=str(client_cert),
                       EVENTS__NATS_TLS_KEY_FILE=str(client_key),
                       EVENTS__NATS_TOKEN=secrets.token_hex(8))
    caplog.set_level(logging.WARNING, logger="gateway.upstream.events")
    await node.core.start()
    await wait_for(lambda: node.up() == 1, 10)
    assert not any("plaintext" in r.getMessage() for r in caplog.records)
    # Without the client certificate the server refuses the connection: never up.
    other = events_core(url, EVENTS__NATS_TLS_CA_FILE=str(server_cert))
    await other.core.start()
    await asyncio.sleep(2.0)
    assert other.up() == 0


def nkey_seed(directory: Path, name: str) -> tuple[Path, str]:
    """A fresh user nkey: (seed file, public key)."""
    seed = nkeys.encode_seed(os.urandom(32), nkeys.PREFIX_BYTE_USER)
    path = directory / f"{name}.nk"
    path.write_bytes(seed + b"\n")
    return path, nkeys.from_seed(bytearray(seed)).public_key.decode()


async def test_an_nkey_seed_file_authenticates(
    nats_server: Callable[..., NatsServer], events_core: Callable[..., EventsCore],
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    seed, public = nkey_seed(tmp_path, "gateway")
    other_seed, _ = nkey_seed(tmp_path, "stranger")
    server = nats_server(f'authorization {{ users = [ {{ nkey: "{public}" }} ] }}')
    caplog.set_level(logging.WARNING, logger="gateway.upstream.events")
    node = events_core(server.url, EVENTS__NATS_NKEY_SEED_FILE=str(seed))
    await node.core.start()
    await wait_for(lambda: node.up() == 1, 10)
    assert not any("plaintext" in r.getMessage() for r in caplog.records)  # the seed never leaves
    stranger = events_core(server.url, EVENTS__NATS_NKEY_SEED_FILE=str(other_seed))
    await stranger.core.start()
    await asyncio.sleep(2.0)
    assert stranger.up() == 0
