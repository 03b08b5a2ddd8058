"""GatewayService.credentials_now: a confirmed cache hit answered without a coroutine, exactly
as `get_credentials` answers it, and None (await `get_credentials`) whenever the answer needs
anything more: a fetch, an identity check, a renewal, or a credential at the serve floor."""

from __future__ import annotations

import logging

import pytest

from gateway.audit import configure_audit
from gateway.errors import NotFoundError
from gateway.models import AccessMode, Outcome, RequestContext, TableRef
from tests.fakes.catalog import FakeCatalog
from tests.fakes.clock import FakeClock

CTX = RequestContext(request_id="r-1")
REF = TableRef("demo", ("ns",), "orders")
VENDS = "load_generic_table_credentials"


async def test_a_confirmed_hit_is_the_answer_get_credentials_gives(
    make_core, catalog: FakeCatalog, clock: FakeClock
) -> None:
    service = make_core().service
    first = await service.get_credentials(REF, AccessMode.READ, CTX)
    clock.advance(5)
    now = service.credentials_now(REF, AccessMode.READ, CTX)
    awaited = await service.get_credentials(REF, AccessMode.READ, CTX)
    assert now is not None
    assert now.outcome is awaited.outcome is Outcome.HIT
    assert now.credentials is awaited.credentials is first.credentials
    assert (now.warehouse, now.ref, now.access) == (awaited.warehouse, awaited.ref,
                                                   awaited.access)
    assert now.remaining_s == awaited.remaining_s == pytest.approx(first.remaining_s - 5)
    assert now.identity_ttl_s == awaited.identity_ttl_s
    assert catalog.calls[VENDS] == 1


async def test_a_cold_table_is_none_and_nothing_is_fetched(
    make_core, catalog: FakeCatalog
) -> None:
    service = make_core().service
    assert service.credentials_now(REF, AccessMode.READ, CTX) is None
    assert catalog.calls[VENDS] == 0
    await service.get_credentials(REF, AccessMode.READ, CTX)
    assert service.credentials_now(REF, AccessMode.WRITE, CTX) is None  # another key
    assert catalog.calls[VENDS] == 1


async def test_never_at_the_serve_floor_the_awaited_path_fetches_a_new_one(
    make_core, catalog: FakeCatalog, clock: FakeClock
) -> None:
    service = make_core().service
    first = await service.get_credentials(REF, AccessMode.READ, CTX)
    assert first.remaining_s is not None
    clock.advance(first.remaining_s - 300 + 1)  # 299 s left: under the 300 s floor
    assert service.credentials_now(REF, AccessMode.READ, CTX) is None
    fresh = await service.get_credentials(REF, AccessMode.READ, CTX)
    assert fresh.credentials is not first.credentials
    assert fresh.remaining_s is not None
    assert fresh.remaining_s > 300


async def test_an_identity_due_for_confirmation_is_none(
    make_core, catalog: FakeCatalog, clock: FakeClock
) -> None:
    service = make_core(CACHE__IDENTITY_TTL_S="30").service
    await service.get_credentials(REF, AccessMode.READ, CTX)
    assert service.credentials_now(REF, AccessMode.READ, CTX) is not None
    clock.advance(31)
    assert service.credentials_now(REF, AccessMode.READ, CTX) is None  # `confirm` loads it
    loads = catalog.calls["load_generic_table"]
    assert (await service.get_credentials(REF, AccessMode.READ, CTX)).outcome is Outcome.HIT
    assert catalog.calls["load_generic_table"] == loads + 1
    assert service.credentials_now(REF, AccessMode.READ, CTX) is not None


async def test_inside_the_asked_window_it_is_none_so_the_awaited_path_renews(
    make_core, catalog: FakeCatalog, clock: FakeClock
) -> None:
    service = make_core().service
    await service.get_credentials(REF, AccessMode.READ, CTX)
    clock.advance(3600 - 700)
    await service.get_credentials(REF, AccessMode.READ, CTX)  # its identity confirmed again
    assert service.credentials_now(REF, AccessMode.READ, CTX) is not None
    assert service.credentials_now(REF, AccessMode.READ, CTX, min_left_s=960) is None
    renewed = await service.get_credentials(REF, AccessMode.READ, CTX, min_left_s=960)
    assert renewed.outcome is Outcome.MISS
    await service.get_credentials(REF, AccessMode.READ, CTX, min_left_s=960)
    assert service.credentials_now(REF, AccessMode.READ, CTX, min_left_s=960) is not None


async def test_a_negative_cached_table_is_refused_and_audited(
    make_core, catalog: FakeCatalog, caplog: pytest.LogCaptureFixture
) -> None:
    configure_audit(True)
    service = make_core().service
    missing = TableRef("demo", ("ns",), "nope")
    with pytest.raises(NotFoundError):
        await service.get_credentials(missing, AccessMode.READ, CTX)
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="lakegate.audit"), pytest.raises(NotFoundError):
        service.credentials_now(missing, AccessMode.READ, CTX)
    assert [r.getMessage() for r in caplog.records] == ["credential NotFoundError"]


async def test_every_hit_is_audited_like_an_awaited_one(make_core, catalog: FakeCatalog) -> None:
    configure_audit(True)
    service = make_core().service
    await service.get_credentials(REF, AccessMode.READ, CTX)
    before = service.audit.pending
    for _ in range(3):
        assert service.credentials_now(REF, AccessMode.READ, CTX) is not None
    assert service.audit.pending == before + 3
