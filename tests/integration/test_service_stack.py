"""The gateway core (GatewayService, in process) against the real local stack.

Real IdP (client-credentials JWTs), real catalog emulator (STS on SeaweedFS), real clock.
Counters come from the emulator's and the IdP's own stats hooks.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable
from urllib.parse import urlsplit, urlunsplit

import pytest

from gateway.errors import CredentialExpiredError, UnavailableError, UpstreamError
from gateway.metrics import Metrics
from gateway.models import AccessMode, CreateTableSpec, Outcome, RequestContext, TableRef
from gateway.service import Core, GatewayService, build_core
from gateway.settings import Settings
from tests.core_factory import CoreFactory
from tests.fakes.tasks import FakeTaskRegistry
from tests.gateway_process import stack_env

pytestmark = pytest.mark.integration

ServiceFactory = Callable[..., Awaitable[GatewayService]]


def ctx() -> RequestContext:
    return RequestContext(request_id=str(uuid.uuid4()))


@pytest.fixture
async def make_service(devstack) -> AsyncIterator[ServiceFactory]:
    registry = FakeTaskRegistry()

    def build(**overrides: str) -> Core:
        env = stack_env(devstack.info) | {f"LAKEGATE__{k}": v for k, v in overrides.items()}
        return build_core(Settings.load(environ=env), Metrics(), registry.spawn)

    factory = CoreFactory(build)
    yield factory
    await factory.close()
    await registry.cancel_all()


async def create_tables(svc: GatewayService, info: dict, count: int, prefix: str) -> list[str]:
    names = [f"{prefix}_{i}" for i in range(count)]
    for name in names:
        await svc.create_table(info.warehouse.name, (info.namespace,),
                               CreateTableSpec(name=name, format="lance"), ctx())
    return names


async def test_200_callers_over_50_tables_make_50_credential_calls_and_1_token_request(
    devstack, make_service, emulator, idp_stats
):
    info = devstack.info
    setup = await make_service()
    names = await create_tables(setup, info, 50, f"sf{uuid.uuid4().hex[:6]}")
    emulator.reset()
    idp_stats.reset()
    svc = await make_service()  # a fresh gateway: cold cache, no token yet
    refs = [TableRef(info.warehouse.name, (info.namespace,), names[i % 50])
            for i in range(200)]
    async with asyncio.timeout(60):
        lookups = await asyncio.gather(*[svc.get_credentials(r, AccessMode.READ, ctx())
                                         for r in refs])
    stats = emulator.stats()
    assert stats["load_generic_table_credentials"] == 50
    assert stats["config"] <= 1
    assert idp_stats.token_requests() == 1
    outcomes = Counter(lk.outcome for lk in lookups)
    assert outcomes[Outcome.MISS] == 50
    assert outcomes[Outcome.COALESCED] == 150
    assert all(lk.remaining_s > 300 for lk in lookups)


@pytest.mark.slow
async def test_hot_key_is_refreshed_ahead_with_a_short_advertised_lifetime(
    devstack, make_service, emulator
):
    info = devstack.info
    svc = await make_service(CACHE__MIN_REMAINING_S="2", CACHE__REFRESH_LEAD_S="12",
                             CACHE__IDLE_S="600")
    [name] = await create_tables(svc, info, 1, f"ra{uuid.uuid4().hex[:6]}")
    emulator.set_faults(credential_lifetime_s=20)
    emulator.clear_credential_cache()
    ref = TableRef(info.warehouse.name, (info.namespace,), name)
    outcomes: Counter[Outcome] = Counter()
    expiries: set[int | None] = set()
    lowest = float("inf")
    deadline = time.monotonic() + 16
    while time.monotonic() < deadline:
        lookup = await svc.get_credentials(ref, AccessMode.READ, ctx())
        outcomes[lookup.outcome] += 1
        expiries.add(lookup.credentials.expires_at_ms)
        lowest = min(lowest, lookup.remaining_s)
        await asyncio.sleep(0.25)
    assert outcomes[Outcome.MISS] == 1, outcomes
    assert outcomes[Outcome.COALESCED] == 0
    assert outcomes[Outcome.STALE] == 0
    assert len(expiries) >= 2  # refreshed in the background at least once
    assert lowest > 2


@pytest.mark.slow
async def test_catalog_503_serves_stale_above_floor_then_a_clear_error(
    devstack, make_service, emulator
):
    info = devstack.info
    svc = await make_service(CACHE__MIN_REMAINING_S="3", CACHE__REFRESH_LEAD_S="15",
                             UPSTREAM__DEADLINE_S="2", UPSTREAM__TIMEOUT_S="1",
                             UPSTREAM__MAX_RETRIES="1")
    [name] = await create_tables(svc, info, 1, f"st{uuid.uuid4().hex[:6]}")
    emulator.set_faults(credential_lifetime_s=20)
    emulator.clear_credential_cache()
    ref = TableRef(info.warehouse.name, (info.namespace,), name)
    first = await svc.get_credentials(ref, AccessMode.READ, ctx())
    emulator.set_faults(status=503, operations=["load_generic_table_credentials"],
                        credential_lifetime_s=20)
    outcomes: Counter[str] = Counter()
    deadline = time.monotonic() + 25
    while time.monotonic() < deadline:
        try:
            lookup = await svc.get_credentials(ref, AccessMode.READ, ctx())
        except (UnavailableError, CredentialExpiredError) as err:
            outcomes[type(err).__name__] += 1
            outcomes[f"status_{err.status}"] += 1
            if outcomes[type(err).__name__] >= 3:
                break
        else:
            outcomes[lookup.outcome.value] += 1
            assert lookup.remaining_s > 3
            assert lookup.credentials.expires_at_ms == first.credentials.expires_at_ms
        await asyncio.sleep(0.25)
    assert outcomes["stale"] > 0, outcomes
    assert outcomes["UnavailableError"] >= 3, outcomes
    assert outcomes["status_503"] == outcomes["UnavailableError"] + outcomes[
        "CredentialExpiredError"]


class TcpRelay:
    """A loopback TCP relay in front of the IdP: closing it is "the IdP is down"."""

    def __init__(self, target_host: str, target_port: int) -> None:
        self._target = (target_host, target_port)
        self._server: asyncio.Server | None = None
        self._conns: set[asyncio.StreamWriter] = set()
        self.port = 0

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]

    async def _pipe(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(ConnectionError, OSError):
            while data := await reader.read(65536):
                writer.write(data)
                await writer.drain()
        writer.close()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        up_reader, up_writer = await asyncio.open_connection(*self._target)
        self._conns |= {writer, up_writer}
        await asyncio.gather(self._pipe(reader, up_writer), self._pipe(up_reader, writer))

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            for w in self._conns:
                w.close()
            await self._server.wait_closed()
            self._server = None


async def test_idp_down_keeps_cached_credentials_served(devstack, make_service, emulator):
    info = devstack.info
    token_url = urlsplit(info.idp.token_url)
    relay = TcpRelay(token_url.hostname, token_url.port)
    await relay.start()
    try:
        setup = await make_service()
        [name] = await create_tables(setup, info, 1, f"idp{uuid.uuid4().hex[:6]}")
        relayed = urlunsplit(token_url._replace(netloc=f"127.0.0.1:{relay.port}"))
        svc = await make_service(TOKEN__TOKEN_URL=relayed)
        ref = TableRef(info.warehouse.name, (info.namespace,), name)
        first = await svc.get_credentials(ref, AccessMode.READ, ctx())
        await relay.stop()  # the IdP is now unreachable for this gateway
        for _ in range(20):
            lookup = await svc.get_credentials(ref, AccessMode.READ, ctx())
            assert lookup.outcome is Outcome.HIT
            assert lookup.credentials is first.credentials
        ready, reason = await svc.readiness()
        assert ready, reason
        # A new table needs the catalog, which still accepts the current (unexpired) token.
        other = TableRef(ref.warehouse, ref.namespace, f"{name}_absent")
        with pytest.raises(UpstreamError):
            await svc.get_credentials(other, AccessMode.READ, ctx())
    finally:
        await relay.stop()


async def test_429_retry_after_is_one_shared_wait_and_one_retry(devstack, make_service, emulator):
    info = devstack.info
    svc = await make_service()
    [name] = await create_tables(svc, info, 1, f"rl{uuid.uuid4().hex[:6]}")
    emulator.reset()
    emulator.set_faults(status=429, retry_after=1, count=1,
                        operations=["load_generic_table_credentials"])
    ref = TableRef(info.warehouse.name, (info.namespace,), name)
    started = time.monotonic()
    async with asyncio.timeout(30):
        lookups = await asyncio.gather(*[svc.get_credentials(ref, AccessMode.READ, ctx())
                                         for _ in range(300)])
    assert time.monotonic() - started >= 1.0
    assert emulator.stats()["load_generic_table_credentials"] == 2
    assert Counter(lk.outcome for lk in lookups) == {Outcome.MISS: 1, Outcome.COALESCED: 299}
