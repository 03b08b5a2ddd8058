import asyncio
from collections import Counter

import pytest

from gateway.errors import (
    CredentialExpiredError,
    InvalidRequestError,
    NotFoundError,
    UnavailableError,
)
from gateway.metrics import Metrics
from gateway.models import AccessMode, CreateTableSpec, Outcome, RequestContext, TableRef
from gateway.service import build_core
from gateway.upstream.events import ChangeEvent
from tests.core_factory import CoreFactory
from tests.fakes.catalog import FakeCatalog, FakeIdP, Fault
from tests.fakes.rng import seeded
from tests.fakes.settings import make_settings
from tests.herd import gated_herd

CTX = RequestContext(request_id="r-1")
REF = TableRef("demo", ("ns",), "orders")


async def drive(clock, coro, max_fake_s=120.0):
    """Await `coro` while moving fake time, so retries sleeping on the FakeClock progress."""
    task = asyncio.ensure_future(coro)
    elapsed = 0.0
    while not task.done() and elapsed < max_fake_s:
        await clock.run_for(0.5, step=0.5, ticks=5)
        elapsed += 0.5
    async with asyncio.timeout(5):
        return await task


@pytest.fixture
def idp():
    return FakeIdP(expires_in=3600)


@pytest.fixture
def catalog(clock):
    cat = FakeCatalog(clock)
    cat.add_table(("ns",), "orders")
    return cat


@pytest.fixture
async def make(clock, idp, catalog, registry):
    factory = CoreFactory(lambda **env: build_core(
        make_settings(**env), Metrics(), registry.spawn, clock,
        transport=catalog.transport(idp), rng=seeded(2)))
    yield factory
    await factory.close()


async def test_1000_concurrent_requests_for_a_cold_table_make_one_credential_call(
    make, catalog, idp
):
    svc = await make()
    gate = catalog.hold("load_generic_table_credentials")
    async def twenty_turns() -> None:
        for _ in range(20):
            await asyncio.sleep(0)

    results = await gated_herd(1000, lambda: svc.get_credentials(REF, AccessMode.READ, CTX),
                               gate, settle=twenty_turns)
    assert catalog.calls["load_generic_table_credentials"] == 1
    assert catalog.calls["config"] == 1
    assert idp.grants == 1
    assert Counter(r.outcome for r in results) == {Outcome.MISS: 1, Outcome.COALESCED: 999}


async def test_200_callers_over_50_tables_make_50_calls_and_one_token_request(
    make, catalog, idp
):
    for i in range(50):
        catalog.add_table(("ns",), f"t{i}")
    svc = await make()
    refs = [TableRef("demo", ("ns",), f"t{i % 50}") for i in range(200)]
    async with asyncio.timeout(10):
        await asyncio.gather(*[svc.get_credentials(r, AccessMode.READ, CTX) for r in refs])
    assert catalog.calls["load_generic_table_credentials"] == 50
    assert idp.grants == 1


async def test_vended_load_builds_config_from_the_same_cached_credential(make, catalog):
    svc = await make()
    lookup = await svc.get_credentials(REF, AccessMode.READ, CTX)
    load = await svc.load_table(REF, CTX, vended=True)
    cred = lookup.credentials.credentials[0]
    assert load.credentials == lookup.credentials.credentials
    assert load.config["s3.access-key-id"] == cred.config["s3.access-key-id"]
    assert "s3.session-token-expires-at-ms" not in load.config
    assert "expiration-time" not in load.config
    assert load.outcome is Outcome.HIT
    assert catalog.requests[-1][1]["X-Iceberg-Access-Delegation"] == "client-managed"
    plain = await svc.load_table(REF, CTX, vended=False)
    assert plain.config is None
    assert plain.credentials is None


async def test_metadata_is_cached_briefly(make, catalog, clock):
    svc = await make()
    await svc.load_table(REF, CTX, vended=False)
    await svc.load_table(REF, CTX, vended=False)
    assert catalog.calls["load_generic_table"] == 1
    clock.advance(6)
    await svc.load_table(REF, CTX, vended=False)
    assert catalog.calls["load_generic_table"] == 2


async def test_drop_invalidates_credentials_and_metadata(make, catalog):
    svc = await make()
    await svc.get_credentials(REF, AccessMode.READ, CTX)
    await svc.get_credentials(REF, AccessMode.WRITE, CTX)
    await svc.load_table(REF, CTX, vended=False)
    await svc.drop_table(TableRef("demo", ("NS",), "ORDERS"), CTX, purge=False)
    with pytest.raises(NotFoundError):
        await svc.load_table(REF, CTX, vended=False)
    with pytest.raises(NotFoundError):
        await svc.get_credentials(REF, AccessMode.READ, CTX)


async def test_rename_invalidates_both_names(make, catalog):
    svc = await make()
    await svc.get_credentials(REF, AccessMode.READ, CTX)
    new = TableRef("demo", ("ns",), "orders2")
    with pytest.raises(NotFoundError):
        await svc.get_credentials(new, AccessMode.READ, CTX)  # negative-cached now
    await svc.rename_table("demo", (("ns",), "orders"), (("ns",), "orders2"), CTX)
    assert (await svc.get_credentials(new, AccessMode.READ, CTX)).outcome is Outcome.MISS
    with pytest.raises(NotFoundError):
        await svc.get_credentials(REF, AccessMode.READ, CTX)


async def test_create_clears_a_negative_entry_for_the_name(make, catalog):
    svc = await make()
    ref = TableRef("demo", ("ns",), "fresh")
    with pytest.raises(NotFoundError):
        await svc.get_credentials(ref, AccessMode.READ, CTX)
    created = await svc.create_table("demo", ("ns",), CreateTableSpec(name="fresh",
                                                                      format="lance"), CTX)
    assert created.table.name == "fresh"
    assert created.credentials is None
    assert (await svc.get_credentials(ref, AccessMode.READ, CTX)).outcome is Outcome.MISS


async def test_a_name_resolved_at_invalidate_time_reaches_keys_cached_under_the_uuid(
    make, catalog
):
    """Defect 6: callers used only the UUID, so the resolver never learned the name and an
    admin invalidate by name dropped nothing. The surfaces resolve the name first."""
    svc = await make()
    by_id = TableRef(catalog.warehouse_id, ("ns",), "orders")
    await svc.get_credentials(by_id, AccessMode.READ, CTX)
    assert svc.invalidate(REF) == 0  # REF names the warehouse "demo": not learned yet
    await svc.resolve_warehouse(REF.warehouse, CTX)  # what the admin surfaces now do first
    assert svc.invalidate(REF) == 1
    assert (await svc.get_credentials(by_id, AccessMode.READ, CTX)).outcome is Outcome.MISS


async def test_admin_invalidation_by_warehouse_name_id_or_all(make, catalog):
    svc = await make()
    await svc.get_credentials(REF, AccessMode.READ, CTX)
    assert svc.invalidate(REF) == 1
    await svc.get_credentials(REF, AccessMode.READ, CTX)
    assert svc.invalidate(TableRef(catalog.warehouse_id.upper(), ("ns",), "orders")) == 1
    await svc.get_credentials(REF, AccessMode.READ, CTX)
    assert svc.invalidate(all=True) == 1
    assert svc.invalidate(TableRef("unknown-wh", ("ns",), "orders")) == 0
    with pytest.raises(InvalidRequestError):
        svc.invalidate()


async def test_warehouse_uuid_is_accepted_without_a_lookup(make, catalog):
    svc = await make()
    ref = TableRef(catalog.warehouse_id, ("ns",), "orders")
    lookup = await svc.get_credentials(ref, AccessMode.READ, CTX)
    assert lookup.warehouse.id == catalog.warehouse_id
    assert catalog.calls["config"] == 0


async def test_unknown_warehouse_is_not_found_and_remembered_briefly(make, catalog, clock):
    svc = await make()
    for _ in range(3):
        with pytest.raises(NotFoundError) as info:
            await svc.get_credentials(TableRef("nope", ("ns",), "t"), AccessMode.READ, CTX)
        assert info.value.type_name == "NoSuchWarehouseException"
    assert catalog.calls["config"] == 1
    catalog.warehouses["nope"] = "0198f0c2-0000-7b0a-9c4d-5e6f7a8b9c0d"
    clock.advance(5.1)
    wh = await svc.resolve_warehouse("nope", CTX)
    assert wh.id == "0198f0c2-0000-7b0a-9c4d-5e6f7a8b9c0d"


@pytest.mark.parametrize(
    "ref",
    [("", ("ns",), "t"), ("demo", (), "t"), ("demo", ("",), "t"),
     ("demo", ("ns",), ""), ("demo", ("ns",), "a\x00b"),
     ("demo", ("a\x1fb",), "t"), ("demo", ("ns",), "x" * 2000)],
)
async def test_malformed_names_are_rejected_before_any_io(make, catalog, ref):
    svc = await make()
    with pytest.raises(InvalidRequestError):  # TableRef validates on construction
        await svc.get_credentials(TableRef(*ref), AccessMode.READ, CTX)
    assert sum(catalog.calls.values()) == 0


async def test_idp_down_keeps_serving_cached_credentials(make, catalog, idp, clock):
    svc = await make()
    await svc.get_credentials(REF, AccessMode.READ, CTX)
    idp.down = True
    outcomes = Counter()
    for _ in range(55):  # past the token's 80% refresh point, the IdP refusing
        await clock.run_for(60, step=10)
        lookup = await drive(clock, svc.get_credentials(REF, AccessMode.READ, CTX))
        outcomes[lookup.outcome] += 1
        assert lookup.remaining_s > 300
    assert outcomes[Outcome.HIT] == 55
    assert idp.grants == 1
    assert len(idp.requests) > 1


async def test_catalog_503_serves_stale_above_floor_then_a_clear_error(make, catalog, clock):
    svc = await make(CACHE__IDLE_S="7200")
    await svc.get_credentials(REF, AccessMode.READ, CTX)
    catalog.fail("load_generic_table_credentials", Fault(status=503), times=10_000)
    outcomes = Counter()
    errors = Counter()
    for _ in range(70):  # one request a minute across the credential's life and beyond
        await clock.run_for(60, step=10)
        try:
            lookup = await drive(clock, svc.get_credentials(REF, AccessMode.READ, CTX))
        except (UnavailableError, CredentialExpiredError) as err:
            errors[type(err).__name__] += 1
            continue
        outcomes[lookup.outcome] += 1
        assert lookup.remaining_s > 300
    assert outcomes[Outcome.STALE] > 0
    assert errors["UnavailableError"] > 0


async def test_readiness_reflects_token_and_catalog(make, catalog, idp, clock):
    svc = await make()
    assert await svc.readiness() == (True, "ok")
    catalog.fail("health", Fault(status=503), times=5)
    clock.advance(3)
    ready, reason = await svc.readiness()
    assert not ready
    assert "catalog" in reason
    await svc.get_credentials(REF, AccessMode.READ, CTX)
    clock.advance(3)
    ready, reason = await svc.readiness()
    assert ready
    assert "cached" in reason


async def test_close_stops_every_background_task(clock, idp, catalog, registry):
    core = build_core(make_settings(), Metrics(), registry.spawn, clock,
                      transport=catalog.transport(idp))
    await core.start()
    await core.service.get_credentials(REF, AccessMode.READ, CTX)
    assert registry.live >= 2  # refresher + token refresher
    await core.close()
    await clock.settle()
    assert registry.live == 0


async def test_list_and_catalog_config_pass_through(make, catalog):
    svc = await make()
    page = await svc.list_tables("demo", ("ns",), CTX, page_size=10)
    assert [i.name for i in page.identifiers] == ["orders"]
    cfg = await svc.catalog_config("demo", CTX)
    assert cfg["defaults"]["prefix"] == catalog.warehouse_id
    with pytest.raises(InvalidRequestError):
        await svc.list_tables("demo", ("ns",), CTX, page_size=0)


async def test_forward_refuses_paths_that_escape_the_allow_list(make):
    svc = await make()
    with pytest.raises(InvalidRequestError):
        await svc.forward("GET", "/catalog/v1/../management/v1/x", "", None, CTX)
    resp = await svc.forward("GET", "/catalog/v1/x/namespaces", "", None, CTX)
    assert resp.status == 200


async def test_429_with_retry_after_is_one_shared_wait_for_1000_callers(make, catalog, clock):
    svc = await make()
    catalog.fail("load_generic_table_credentials", Fault(status=429, retry_after="3"))
    waiters = [asyncio.ensure_future(svc.get_credentials(REF, AccessMode.READ, CTX))
               for _ in range(1000)]
    await clock.run_for(2.5, step=0.5)
    assert catalog.calls["load_generic_table_credentials"] == 1
    assert not any(w.done() for w in waiters)
    await clock.run_for(1.0, step=0.5)
    async with asyncio.timeout(10):
        results = await asyncio.gather(*waiters)
    assert catalog.calls["load_generic_table_credentials"] == 2
    assert Counter(r.outcome for r in results) == {Outcome.MISS: 1, Outcome.COALESCED: 999}


async def test_a_re_resolved_warehouse_moves_the_credential_key_to_the_new_id(make, catalog):
    from gateway.models import Warehouse

    svc = await make()
    first = await svc.get_credentials(REF, AccessMode.READ, CTX)
    assert (await svc.get_credentials(REF, AccessMode.READ, CTX)).outcome is Outcome.HIT
    new_id = "0198f0c2-0000-7b0a-9c4d-000000000002"
    catalog.warehouses["demo"] = new_id
    catalog.add_table(("ns",), "orders")
    # A new resolution of the name (as /catalog/v1/config?warehouse=demo records one) must
    # take effect on the very next request, memoized credential key or not.
    svc.warehouses.remember("", "demo", Warehouse(id=new_id, name="demo"))
    moved = await svc.get_credentials(REF, AccessMode.READ, CTX)
    assert moved.warehouse.id == new_id != first.warehouse.id
    assert moved.outcome is Outcome.MISS


async def test_the_credential_key_memo_stays_bounded(make, catalog, monkeypatch):
    from gateway.cache import credential_keys

    monkeypatch.setattr(credential_keys, "KEY_MEMO_MAX", 4)
    for i in range(10):
        catalog.add_table(("ns",), f"m{i}")
    svc = await make()
    for i in range(10):
        await svc.get_credentials(TableRef("demo", ("ns",), f"m{i}"), AccessMode.READ, CTX)
    assert len(svc.keys) == 4
    assert (await svc.get_credentials(TableRef("demo", ("ns",), "m0"), AccessMode.READ,
                                      CTX)).outcome is Outcome.HIT


async def test_a_write_grant_is_audited_before_its_answer_even_when_coalesced(
    make, catalog, audit_stream
):
    """docs/contracts.md §6: misses, errors, refusals and write grants are written before the
    answer leaves; only a coalesced *read* may follow its answer (a folded kind)."""
    import itertools
    import json

    from gateway.audit import configure_audit

    configure_audit(True)
    svc = await make()
    gate = catalog.hold("load_generic_table_credentials")
    ids = itertools.count()

    async def ask(access: AccessMode) -> tuple[Outcome, str, bool]:
        rid = f"{access.value}-{next(ids)}"
        lookup = await svc.get_credentials(REF, access, RequestContext(request_id=rid))
        written = {json.loads(x).get("request_id") for x in audit_stream.getvalue().splitlines()}
        return lookup.outcome, access.value, rid in written  # checked as the answer returns

    writes = await gated_herd(3, lambda: ask(AccessMode.WRITE), gate)
    assert sorted(o for o, _, _ in writes) == sorted([Outcome.MISS] + [Outcome.COALESCED] * 2)
    assert all(before for _, _, before in writes)
    gate = catalog.hold("load_generic_table_credentials")
    svc.invalidate(REF)
    reads = await gated_herd(3, lambda: ask(AccessMode.READ), gate)
    assert [before for o, _, before in reads if o is Outcome.MISS] == [True]
    assert [before for o, _, before in reads if o is Outcome.COALESCED] == [False, False]


async def test_a_change_event_read_from_a_lagging_replica_is_confirmed_again_shortly(
    make, catalog, clock
):
    # #33 build item 2 through the interface the events consumer calls: the refetch right
    # after the event still reads the old table; it is not trusted for the events TTL.
    svc = await make()
    svc.identity.set_ttl(300.0)  # subscribed
    old = (await svc.get_credentials(REF, AccessMode.READ, CTX)).credentials.location
    svc.apply_change(ChangeEvent(type="dropGenericTable", warehouse_id=catalog.warehouse_id,
                                 tabular_id="t-1", names=((("ns",), "orders"),)))  # replica behind
    got = await svc.get_credentials(REF, AccessMode.READ, CTX)
    assert (got.outcome, got.credentials.location) == (Outcome.MISS, old)
    catalog.tables[(catalog.warehouse_id, ("ns",), "orders")].base_location = "s3://bucket/new"
    clock.advance(2.0)  # the replica caught up
    got = await svc.get_credentials(REF, AccessMode.READ, CTX)
    assert got.credentials.location == "s3://bucket/new"


def test_the_vended_load_config_comes_from_the_credential_covering_the_location() -> None:
    # #33 finding 7: `s3://b/t` was taken for `s3://b/t2` (the longest prefix by `startswith`).
    from gateway.cache.expiry import credential_set, storage_credential
    from gateway.service.gateway_service import _credential_for

    creds = credential_set([storage_credential("s3://b/", {"s3.access-key-id": "bucket"}),
                            storage_credential("s3://b/t", {"s3.access-key-id": "table-t"})])
    chosen = _credential_for("s3://b/t2", creds)
    assert chosen is not None
    assert chosen.prefix == "s3://b/"
    chosen = _credential_for("s3://b/t/data", creds)
    assert chosen is not None
    assert chosen.prefix == "s3://b/t"


async def test_a_cold_herd_over_50_tables_makes_no_table_load_within_the_first_ttl(
    make, catalog, clock
):
    # #36 item 3: the bench's cold herd (200 callers over 50 new tables, 80 requests each)
    # made 50 credential calls and ~27 generic-table loads: identity checks of entries the
    # fill had just established.
    for i in range(50):
        catalog.add_table(("ns",), f"t{i}")
    svc = await make()

    async def caller(i: int) -> None:
        for n in range(80):
            ref = TableRef("demo", ("ns",), f"t{(i * 3 + n) % 50}")
            await svc.get_credentials(ref, AccessMode.READ, CTX)

    async with asyncio.timeout(30):
        await asyncio.gather(*(caller(i) for i in range(200)))
    clock.advance(29)
    async with asyncio.timeout(30):
        await asyncio.gather(*(caller(i) for i in range(10)))
    assert catalog.calls["load_generic_table_credentials"] == 50
    assert catalog.calls["load_generic_table"] == 0


async def test_a_table_created_here_costs_no_identity_load_within_the_first_ttl(
    make, catalog, clock
):
    # The create's answer names the new location: a first read showing it is the change
    # seen (no lagging-replica rechecks for a bench's or a job's fresh tables).
    svc = await make()
    await svc.create_table("demo", ("ns",), CreateTableSpec(name="fresh", format="lance"), CTX)
    ref = TableRef("demo", ("ns",), "fresh")
    for _ in range(40):
        await svc.get_credentials(ref, AccessMode.READ, CTX)
        clock.advance(0.7)
    assert catalog.calls["load_generic_table"] == 0


async def test_a_cached_answer_finds_its_cache_key_by_identity(make, monkeypatch):
    """The memo, the cache and the identity guard share one CacheKey object per key, so a hit
    compares no key fields (each generated dataclass `__eq__` built two 7-tuples: about a
    microsecond per cached answer on 3.11)."""
    from gateway.models import CacheKey

    svc = await make()
    # A cold herd: every request resolves the warehouse and derives the key on its own, one
    # fills the cache and the identity record, another one's key may be the memoized one.
    await asyncio.gather(*(svc.get_credentials(REF, AccessMode.READ, CTX) for _ in range(8)))
    await svc.get_credentials(REF, AccessMode.READ, CTX)
    compared = 0
    field_eq = CacheKey.__eq__

    def counting_eq(self: CacheKey, other: object) -> bool:
        nonlocal compared
        compared += 1
        return field_eq(self, other)

    monkeypatch.setattr(CacheKey, "__eq__", counting_eq)
    lookup = svc.credentials_now(REF, AccessMode.READ, CTX)
    assert lookup is not None
    assert lookup.outcome is Outcome.HIT
    assert compared == 0


def test_cache_keys_compare_by_every_field():
    from gateway.models import CacheKey

    base = dict(project="p", warehouse_id="w", namespace=("n",), table="t",
                access=AccessMode.READ, delegation="vended", kind="generic")
    key = CacheKey(**base)
    assert key == CacheKey(**base)
    assert hash(key) == hash(CacheKey(**base))
    assert not key != CacheKey(**base)
    for name, other in (("project", "q"), ("warehouse_id", "v"), ("namespace", ("m",)),
                        ("table", "u"), ("access", AccessMode.WRITE),
                        ("delegation", "client-managed"), ("kind", "iceberg")):
        changed = CacheKey(**{**base, name: other})
        assert key != changed, name
        assert not key == changed, name
    assert key != ("p", "w", ("n",), "t", AccessMode.READ, "vended", "generic")
