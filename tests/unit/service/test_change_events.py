import pytest

from gateway.metrics import Metrics
from gateway.models import AccessMode, Outcome, RequestContext, TableRef
from gateway.service.change_events import ChangeEvents
from gateway.upstream.events import ChangeEvent
from tests.fakes.catalog import FakeCatalog

CTX = RequestContext(request_id="r-1")
REF = TableRef("demo", ("NS",), "Orders")


@pytest.fixture
def core(make_core):
    metrics = Metrics()
    return make_core(metrics, CACHE__IDENTITY_TTL_S="20"), metrics


def drop_event(catalog: FakeCatalog, name: str = "orders") -> ChangeEvent:
    return ChangeEvent(type="dropGenericTable", warehouse_id=catalog.warehouse_id,
                       tabular_id="t-1", names=((("ns",), name),))


async def test_an_event_drops_every_access_mode_of_its_table(core, catalog):
    core_, metrics = core
    service = core_.service
    events = ChangeEvents(service, service.identity, service.settings, metrics)
    for access in (AccessMode.READ, AccessMode.WRITE):
        await service.get_credentials(REF, access, CTX)
    events.apply(drop_event(catalog, "other"))  # another table: nothing happens
    assert (await service.get_credentials(REF, AccessMode.READ, CTX)).outcome is Outcome.HIT
    events.apply(drop_event(catalog))
    events.apply(drop_event(catalog))  # a duplicate costs nothing more
    for access in (AccessMode.READ, AccessMode.WRITE):
        assert (await service.get_credentials(REF, access, CTX)).outcome is Outcome.MISS
    assert catalog.calls["load_generic_table_credentials"] == 4
    assert metrics.registry.get_sample_value("lakegate_change_events_total",
                                             {"result": "applied"}) == 3


async def test_losing_the_subscription_shortens_the_identity_ttl_at_once(core, catalog, clock):
    core_, metrics = core
    service = core_.service
    events = ChangeEvents(service, service.identity, service.settings, metrics)
    events.state(True)
    assert service.identity.ttl_s == 300  # events.identity_ttl_s while subscribed
    assert await service.readiness() == (True, "ok")
    await service.get_credentials(REF, AccessMode.READ, CTX)
    clock.advance(30)
    await service.get_credentials(REF, AccessMode.READ, CTX)
    assert catalog.calls["load_generic_table"] == 0  # confirmed for 300 s
    events.state(False)
    assert service.identity.ttl_s == 20
    assert metrics.registry.get_sample_value("lakegate_change_events_up") == 0
    ok, detail = await service.readiness()
    assert ok is True  # requests go on
    assert "change events subscription lost" in detail
    clock.advance(20)
    await service.get_credentials(REF, AccessMode.READ, CTX)
    assert catalog.calls["load_generic_table"] == 1  # the entry confirmed earlier is due now


async def test_a_commit_event_costs_no_refetch(core, catalog):
    core_, metrics = core
    service = core_.service
    events = ChangeEvents(service, service.identity, service.settings, metrics)
    await service.get_credentials(REF, AccessMode.READ, CTX)
    events.apply(ChangeEvent(type="updateTable", warehouse_id=catalog.warehouse_id,
                             tabular_id="t-1", names=()))
    assert (await service.get_credentials(REF, AccessMode.READ, CTX)).outcome is Outcome.HIT
    assert metrics.registry.get_sample_value("lakegate_change_events_total",
                                             {"result": "ignored"}) == 1
