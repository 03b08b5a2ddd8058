import pytest

from gateway.metrics import Metrics
from gateway.models import AccessMode, Outcome, RequestContext, TableRef
from gateway.service import build_core
from tests.fakes.catalog import FakeIdP
from tests.fakes.rng import seeded
from tests.fakes.settings import make_settings
from tests.fakes.tasks import FakeTaskRegistry

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


@pytest.mark.parametrize("offset_s", [-120, -600, 600])
async def test_a_wrong_catalog_clock_never_lengthens_a_credential_and_shows_on_the_gauge(
    clock, catalog, offset_s
):
    registry = FakeTaskRegistry()
    metrics = Metrics()
    catalog.date_offset_s = offset_s
    core = build_core(make_settings(), metrics, registry.spawn, clock,
                      transport=catalog.transport(FakeIdP(expires_in=3600, clock=clock)),
                      rng=seeded(2))
    try:
        lookup = await core.service.get_credentials(REF, AccessMode.READ, CTX)
        assert lookup.remaining_s is not None
        true_left = lookup.credentials.expires_at_ms / 1000 - clock.true_now()
        assert true_left - 2 <= lookup.remaining_s <= true_left  # the IdP broke the tie
        skew = metrics.registry.get_sample_value("lakegate_clock_skew_seconds",
                                                 {"clock": "catalog"})
        assert skew == pytest.approx(offset_s, abs=1.5)
    finally:
        await core.close()
        await registry.cancel_all()
