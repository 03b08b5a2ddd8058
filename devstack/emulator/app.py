"""aiohttp application factory of the Lakekeeper emulator.

The emulator follows Lakekeeper `main` at v0.13.1-78-g90892e9cc (docs/lakekeeper-fidelity.md).
Deliberate deviations (everything else follows Lakekeeper's source):
- An undecodable generic-table `pageToken` is a 400 `InvalidPaginationToken` envelope
  (Lakekeeper wraps it as an unexpected backend error, 5xx); the emulator never answers 5xx for
  bad input. The namespace list answers the same 400 as Lakekeeper.
- `x-assume-role` is honoured in no-auth mode too (Lakekeeper reads it only with authn on), so
  read-only vending can be tested without an IdP; an unknown role UUID is 400 InvalidRoleIdError.
- Only S3 storage profiles; remote signing for Iceberg tables only (routes_signer.py; generic
  tables fall back to vending); storage access is not validated at
  warehouse creation; `allowall` authorization (every authenticated caller may do
  everything); the `x-project-id` header selects a project but projects are not managed.
- Soft-deleted tables past their expiration are hidden but not purged.
- A second request with an Idempotency-Key while the first runs is 409 RequestInProgress.
"""

from __future__ import annotations

import asyncio

from aiohttp import web

from devstack.emulator import (
    routes_catalog,
    routes_hooks,
    routes_iceberg,
    routes_management,
    routes_signer,
    routes_tables,
    routes_transactions,
    routes_views,
)
from devstack.emulator.auth import JwtAuthenticator
from devstack.emulator.config import EmulatorConfig
from devstack.emulator.events import EventPublisher
from devstack.emulator.faults import Faults
from devstack.emulator.idempotency import IdempotencyStore
from devstack.emulator.middleware import envelope_middleware, gate_middleware
from devstack.emulator.purge import PURGE_TASKS
from devstack.emulator.state import STATE, EmulatorState
from devstack.emulator.stats import Stats
from devstack.emulator.store import Store
from devstack.emulator.vending import CredentialVendor, StsClient


def _sts_fault(faults: Faults, stats: Stats) -> bool:
    decision = faults.decide_sts()
    if decision.fails:
        stats.incr("faults_injected")
    return decision.fails


def build_state(config: EmulatorConfig) -> EmulatorState:
    """The emulator's object graph; no I/O besides opening the SQLite file."""
    stats = Stats()
    faults = Faults()
    vendor = CredentialVendor(
        StsClient(),
        on_sts_call=lambda: stats.incr("sts_assume_role"),
        lifetime_override=lambda: faults.credential_lifetime_s,
        sts_fault=lambda: _sts_fault(faults, stats),
        adls_sas_scope=config.adls_sas_scope,
    )
    authenticator = (
        JwtAuthenticator(config.openid_provider_uri, config.audiences)
        if config.openid_provider_uri
        else None
    )
    return EmulatorState(
        config=config,
        store=Store(config.db_path),
        stats=stats,
        faults=faults,
        vendor=vendor,
        idempotency=IdempotencyStore(config.idempotency_lifetime_s),
        authenticator=authenticator,
    )


async def _close(app: web.Application) -> None:
    running = app[PURGE_TASKS]
    tasks = list(running)
    for task in tasks:
        task.cancel()
    if tasks:
        await asyncio.gather(*tasks, return_exceptions=True)
    events = app[STATE].events
    if events is not None:
        await events.close()
    app[STATE].store.close()


async def _start_events(app: web.Application) -> None:
    events = app[STATE].events
    if events is not None:
        await events.start()


def create_app(config: EmulatorConfig) -> web.Application:
    """Build the emulator application (routes, middlewares, state)."""
    app = web.Application(
        middlewares=[envelope_middleware, gate_middleware],
        client_max_size=config.max_body_bytes,
    )
    app[STATE] = build_state(config)
    if config.nats_address and config.nats_topic and config.nats_topic.strip():
        app[STATE].events = EventPublisher(config.nats_address, config.nats_topic)
        app.on_startup.append(_start_events)
    app[PURGE_TASKS] = set()
    routes_hooks.add_routes(app)
    routes_catalog.add_routes(app)
    routes_management.add_routes(app)
    routes_tables.add_routes(app)
    routes_iceberg.setup(app, config.db_path)
    routes_signer.add_routes(app)
    routes_transactions.add_routes(app)
    routes_views.setup(app, config.db_path)
    app.on_cleanup.append(_close)
    return app
