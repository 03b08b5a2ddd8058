import asyncio

import pytest

from gateway.cache.warehouses import WarehouseResolver
from gateway.errors import NotFoundError, UnavailableError
from gateway.metrics import Metrics
from gateway.models import RequestContext
from gateway.upstream.lakekeeper import CatalogClient
from tests.fakes.catalog import FakeCatalog, Fault
from tests.fakes.rng import seeded
from tests.fakes.settings import make_settings
from tests.fakes.tokens import FakeTokenSource

CTX = RequestContext(request_id="r-1")
TTL_S = 60.0


@pytest.fixture
def catalog(clock):
    return FakeCatalog(clock)


@pytest.fixture
def resolver(catalog, clock, registry):
    settings = make_settings(UPSTREAM__MAX_RETRIES="0")
    client = CatalogClient(catalog.transport(), FakeTokenSource(), settings.upstream, Metrics(),
                           clock, rng=seeded(3))
    return WarehouseResolver(client, clock, registry.spawn, ttl_s=TTL_S, wait_s=31.0,
                             negative_ttl_s=5.0, stale_retry_s=5.0, stale_wait_s=0.05)


async def resolve(resolver, name="demo"):
    # The stale path must answer without the upstream deadline passing: a bounded real wait
    # far below the resolver's 31 s deadline (it waits `stale_wait_s` = 0.05 s at most).
    async with asyncio.timeout(5):
        return await resolver.resolve(name, "", CTX)


async def test_a_lapsed_name_is_served_from_its_last_mapping_while_the_catalog_hangs(
    resolver, catalog, clock, registry
):
    first = await resolve(resolver)
    clock.advance(TTL_S + 1)
    gate = catalog.hold("config")  # the catalog accepts the call and never answers
    again = await resolve(resolver)
    assert again.id == first.id == catalog.warehouse_id
    assert catalog.calls["config"] == 2  # one refresh was started
    # Callers until the next attempt are answered from memory, without more lookups.
    for _ in range(10):
        assert (await resolve(resolver)).id == first.id
    assert catalog.calls["config"] == 2
    # Past the retry interval the lookup still hangs: it is not waited for nor repeated.
    clock.advance(6)
    assert (await resolve(resolver)).id == first.id
    assert catalog.calls["config"] == 2
    gate.set()
    await registry.drained()


async def test_a_lapsed_name_is_served_stale_when_the_refresh_fails(
    resolver, catalog, clock, registry
):
    first = await resolve(resolver)
    clock.advance(TTL_S + 1)
    catalog.fail("config", Fault(status=503), times=2)
    assert (await resolve(resolver)).id == first.id
    await registry.drained()
    clock.advance(6)  # past the stale retry interval: another background attempt, fails too
    assert (await resolve(resolver)).id == first.id
    await registry.drained()
    assert catalog.calls["config"] == 3


async def test_a_lapsed_name_is_served_stale_when_the_catalog_is_unreachable(
    resolver, catalog, clock, registry
):
    first = await resolve(resolver)
    clock.advance(TTL_S + 1)
    catalog.fail("config", Fault(drop=True))
    assert (await resolve(resolver)).id == first.id
    await registry.drained()
    assert (await resolve(resolver)).id == first.id


async def test_a_successful_background_refresh_replaces_the_mapping(
    resolver, catalog, clock, registry
):
    await resolve(resolver)
    clock.advance(TTL_S + 1)
    catalog.warehouses["demo"] = "0198f0c2-0000-7000-8000-000000000001"  # recreated
    assert (await resolve(resolver)).id == "0198f0c2-0000-7000-8000-000000000001"
    assert (await resolve(resolver)).id == "0198f0c2-0000-7000-8000-000000000001"
    assert catalog.calls["config"] == 2


async def test_a_404_arriving_after_a_stale_answer_drops_the_mapping(
    resolver, catalog, clock, registry
):
    await resolve(resolver)
    clock.advance(TTL_S + 1)
    gate = catalog.hold("config")
    del catalog.warehouses["demo"]
    await resolve(resolver)  # the catalog is slow: stale answer, the lookup goes on
    gate.set()
    await registry.drained()
    with pytest.raises(NotFoundError):
        await resolve(resolver)


async def test_a_deterministic_404_drops_the_last_known_mapping(
    resolver, catalog, clock, registry
):
    await resolve(resolver)
    clock.advance(TTL_S + 1)
    del catalog.warehouses["demo"]
    with pytest.raises(NotFoundError):
        await resolve(resolver)
    with pytest.raises(NotFoundError):  # remembered briefly (negative TTL)
        await resolve(resolver)
    clock.advance(10)  # past the negative TTL: asked again, still unknown, never the old id
    with pytest.raises(NotFoundError):
        await resolve(resolver)


async def test_a_name_never_resolved_still_fails_when_the_catalog_is_down(
    resolver, catalog, registry
):
    catalog.fail("config", Fault(status=503))
    with pytest.raises(UnavailableError):
        await resolve(resolver)


async def test_arbitrary_uuids_do_not_push_learned_names_out(resolver):
    """Suspected (real): every unknown UUID was remembered among the `known` names (three
    keys each), so a caller sending random UUIDs made the resolver forget the names it had
    learned (their last known ids, used while the catalog is down and for invalidation)."""
    import uuid as uuidlib

    from gateway.tuning import WAREHOUSE_KNOWN_MAX

    wh = await resolve(resolver)
    for _ in range(WAREHOUSE_KNOWN_MAX):
        await resolver.resolve(str(uuidlib.uuid4()), "", CTX)
    assert resolver.ids_for("demo") == {wh.id}
