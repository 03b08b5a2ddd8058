"""The AWS surface's renewal (GatewayService.get_credentials(min_left_s=...)).

botocore refreshes container credentials 15 min before `Expiration` (on every call inside
10 min): a cached credential with less left than the surface asks for is renewed once, shared,
before the answer, so an SDK refreshes once instead of on each call.
"""

from __future__ import annotations

import pytest

from gateway.errors import NotFoundError
from gateway.models import AccessMode, Outcome, RequestContext, TableRef
from tests.fakes.catalog import FakeCatalog, Fault
from tests.fakes.clock import FakeClock

CTX = RequestContext(request_id="r-1")
REF = TableRef("demo", ("ns",), "orders")
MIN_LEFT = 960.0
VENDS = "load_generic_table_credentials"


async def _get(service, min_left_s: float | None = MIN_LEFT):
    return await service.get_credentials(REF, AccessMode.READ, CTX, min_left_s=min_left_s)


async def test_a_credential_inside_the_sdk_window_is_renewed_once_before_the_answer(
    make_core, catalog: FakeCatalog, clock: FakeClock
) -> None:
    service = make_core().service
    first = await _get(service)
    clock.advance(3600 - 700)  # 700 s left: botocore would ask again on every call
    renewed = await _get(service)
    assert catalog.calls[VENDS] == 2
    assert renewed.outcome is Outcome.MISS
    assert renewed.credentials is not first.credentials
    assert renewed.remaining_s is not None
    assert renewed.remaining_s > 3600 - 5
    again = await _get(service)  # the renewed one is the cached one now
    assert again.outcome is Outcome.HIT
    assert again.credentials is renewed.credentials
    assert catalog.calls[VENDS] == 2


async def test_other_surfaces_are_served_down_to_the_floor_without_renewal(
    make_core, catalog: FakeCatalog, clock: FakeClock
) -> None:
    service = make_core().service
    first = await _get(service, None)
    clock.advance(3600 - 700)
    later = await _get(service, None)
    assert later.outcome is Outcome.HIT
    assert later.credentials is first.credentials
    assert catalog.calls[VENDS] == 1


async def test_a_credential_issued_for_less_than_the_window_is_not_renewed_on_every_call(
    make_core, clock: FakeClock, catalog: FakeCatalog
) -> None:
    catalog.credential_lifetime_s = 900  # STS's minimum: a refresh cannot give more than this
    service = make_core().service
    await _get(service)
    for _ in range(5):
        clock.advance(10)
        got = await _get(service)
        assert got.outcome is Outcome.HIT
    assert catalog.calls[VENDS] == 1


async def test_a_renewal_that_brings_no_later_expiry_backs_off(
    make_core, clock: FakeClock, catalog: FakeCatalog
) -> None:
    """Lakekeeper reuses a credential for half its validity: the same expiry again must not be
    re-asked on every request."""
    service = make_core().service
    first = await _get(service)
    clock.advance(3600 - 700)
    catalog.credential_lifetime_s = 700  # the catalog answers with the same expiry
    await _get(service)
    assert catalog.calls[VENDS] == 2
    for _ in range(5):
        clock.advance(1)
        await _get(service)
    assert catalog.calls[VENDS] == 2
    assert first.credentials.expires_at_ms is not None


async def test_a_failed_renewal_serves_the_current_credential_above_the_floor(
    make_core, clock: FakeClock, catalog: FakeCatalog
) -> None:
    service = make_core(UPSTREAM__MAX_RETRIES="0").service
    first = await _get(service)
    clock.advance(3600 - 700)
    catalog.fail(VENDS, Fault(status=503), times=1)
    got = await _get(service)
    assert got.credentials is first.credentials
    assert got.remaining_s is not None
    assert 600 < got.remaining_s <= 700
    assert catalog.calls[VENDS] == 2


async def test_a_renewal_that_finds_the_table_gone_never_serves_the_old_credential(
    make_core, clock: FakeClock, catalog: FakeCatalog
) -> None:
    service = make_core().service
    await _get(service)
    clock.advance(3600 - 700)
    catalog.tables.clear()
    with pytest.raises(NotFoundError):
        await _get(service)
