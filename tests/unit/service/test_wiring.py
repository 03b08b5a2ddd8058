import pytest

from gateway.models import AccessMode, Outcome, RequestContext, TableRef

CTX = RequestContext(request_id="r-1")
REF = TableRef("demo", ("ns",), "orders")


@pytest.fixture
def service(make_core):
    return make_core().service


async def test_the_catalogs_date_reaches_the_cache_so_a_stepped_clock_changes_nothing(
    service, catalog, clock
):
    clock.step_wall(3600)  # the gateway's wall clock is an hour ahead; the catalog's is not
    lookup = await service.get_credentials(REF, AccessMode.READ, CTX)
    assert lookup.outcome is Outcome.MISS
    assert lookup.remaining_s is not None
    assert 3600 - 2 <= lookup.remaining_s < 3600
    # The wire keeps the catalog's own expiry.
    assert lookup.credentials.expires_at_ms == int((clock.true_now() + 3600) * 1000)
    clock.step_wall(-7200)  # now an hour behind
    clock.advance(600)
    again = await service.get_credentials(REF, AccessMode.READ, CTX)
    assert again.outcome is Outcome.HIT
    assert again.remaining_s is not None
    assert again.remaining_s < 3600 - 600
    assert catalog.calls["load_generic_table_credentials"] == 1
