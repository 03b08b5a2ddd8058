"""GatewayService.get_credentials states `identity_ttl_s`: how long the caller (the client's memo)
may keep the answer's table identity, so the caller's bound is never longer than the gateway's."""

from __future__ import annotations

import asyncio

import pytest

from gateway.metrics import Metrics
from gateway.models import AccessMode, RequestContext, TableRef
from gateway.service.change_events import ChangeEvents
from gateway.tuning import EVENTS_CALLER_IDENTITY_TTL_S
from tests.fakes.catalog import FakeCatalog, Fault
from tests.fakes.clock import FakeClock

CTX = RequestContext(request_id="r-1")
REF = TableRef("demo", ("ns",), "orders")
TTL_S = 20.0


@pytest.fixture
def service(make_core):  # type: ignore[no-untyped-def]
    return make_core(Metrics(), CACHE__IDENTITY_TTL_S=str(TTL_S)).service


async def test_the_stated_ttl_counts_down_to_the_gateways_own_next_confirmation(
    service, catalog: FakeCatalog, clock: FakeClock
) -> None:
    first = await service.get_credentials(REF, AccessMode.READ, CTX)
    assert first.identity_ttl_s == TTL_S  # fetched for this request: confirmed now
    clock.advance(5)
    assert (await service.get_credentials(REF, AccessMode.READ, CTX)).identity_ttl_s == 15.0
    clock.advance(14.5)
    assert (await service.get_credentials(REF, AccessMode.READ, CTX)).identity_ttl_s == 0.5
    # Due: the gateway confirms again (one metadata load), and states a whole TTL again.
    clock.advance(0.5)
    again = await service.get_credentials(REF, AccessMode.READ, CTX)
    assert catalog.calls["load_generic_table"] == 1
    assert again.identity_ttl_s == TTL_S


async def test_no_caller_may_keep_a_replaced_identity_past_the_gateways_bound(
    service, catalog: FakeCatalog, clock: FakeClock
) -> None:
    """Whenever asked, answer time + stated TTL never passes the moment the gateway itself
    notices the replacement (its last confirmation + TTL)."""
    table = catalog.tables[next(iter(catalog.tables))]
    old = table.base_location
    await service.get_credentials(REF, AccessMode.READ, CTX)
    clock.advance(7)
    table.base_location, table.id = old + "-v2", "new-id"  # replaced straight at the catalog
    trusted_until = 0.0
    for _ in range(30):
        got = await service.get_credentials(REF, AccessMode.READ, CTX)
        if got.credentials.location == old:
            trusted_until = max(trusted_until, clock.monotonic() + got.identity_ttl_s)
        clock.advance(1)
    assert got.credentials.location == old + "-v2"
    assert 0 < trusted_until <= (clock.monotonic() - 30) - 7 + TTL_S  # first fetch + TTL


async def test_while_events_are_up_the_caller_keeps_an_identity_only_briefly(
    service, clock: FakeClock
) -> None:
    events = ChangeEvents(service, service.identity, service.settings, Metrics(), clock,
                          asyncio.ensure_future)
    events.state(True)  # the guard now trusts its own entries for events.identity_ttl_s
    got = await service.get_credentials(REF, AccessMode.READ, CTX)
    assert got.identity_ttl_s == EVENTS_CALLER_IDENTITY_TTL_S
    events.state(False)  # lost: the gateway's own bound again, capped at once
    clock.advance(1)
    assert (await service.get_credentials(REF, AccessMode.READ, CTX)).identity_ttl_s == (
        TTL_S - 1)


async def test_a_failed_check_is_trusted_only_until_its_retry(
    service, catalog: FakeCatalog, clock: FakeClock
) -> None:
    await service.get_credentials(REF, AccessMode.READ, CTX)
    clock.advance(TTL_S)
    catalog.fail("load_generic_table", Fault(status=503), times=100)
    task = asyncio.ensure_future(service.get_credentials(REF, AccessMode.READ, CTX))
    for _ in range(200):  # the load's retries back off on the fake clock: move it along
        if task.done():
            break
        await clock.run_for(0.5, step=0.5, ticks=5)
    got = await asyncio.wait_for(task, 5)  # served, the check failed
    assert catalog.calls["load_generic_table"] > 1
    assert 0 < got.identity_ttl_s <= 5.0  # IDENTITY_RETRY_S
