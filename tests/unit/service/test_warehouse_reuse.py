"""A warehouse name reused for another warehouse (renamed away, or deleted, and a new one
created under the name): Lakekeeper announces neither, and the identity check reloads a table
by the warehouse id it has, so it cannot notice. The name → id resolution is re-checked within
the identity TTL (the wiring caps `cache.warehouse_ttl_s` at `cache.identity_ttl_s`)."""

from gateway.metrics import Metrics
from gateway.models import AccessMode, RequestContext, TableRef

CTX = RequestContext(request_id="r-1")
REF = TableRef("demo", ("ns",), "orders")
NEW_WAREHOUSE = "0198f0c2-1f2e-7b0a-9c4d-00000000beef"


async def test_a_reused_warehouse_name_answers_the_new_warehouse_within_the_identity_ttl(
    make_core, catalog, clock
):
    core = make_core(Metrics(), CACHE__IDENTITY_TTL_S="20", CACHE__WAREHOUSE_TTL_S="60")
    service = core.service
    old = await service.get_credentials(REF, AccessMode.READ, CTX)
    assert old.warehouse.id == catalog.warehouse_id
    # "demo" is renamed "demo_2025" (its table untouched) and a new "demo" is created.
    catalog.warehouses["demo_2025"] = catalog.warehouses.pop("demo")
    catalog.warehouses["demo"] = NEW_WAREHOUSE
    moved = catalog.add_table(("ns",), "orders")
    moved.base_location = "s3://other-bucket/ns/orders"
    clock.advance(21)
    new = await service.get_credentials(REF, AccessMode.READ, CTX)
    assert new.warehouse.id == NEW_WAREHOUSE
    assert new.credentials.location == "s3://other-bucket/ns/orders"


async def test_a_warehouse_name_is_checked_at_most_once_per_identity_ttl(
    make_core, catalog, clock
):
    core = make_core(Metrics(), CACHE__IDENTITY_TTL_S="20", CACHE__WAREHOUSE_TTL_S="60")
    for _ in range(4):  # at 0, 9, 18 and 27 s
        await core.service.get_credentials(REF, AccessMode.READ, CTX)
        clock.advance(9)
    assert catalog.calls["config"] == 2  # at 0 s and 27 s: one lookup per 20 s, not per call
