import asyncio

import pytest

from gateway.cache.credential_cache import CredentialCache
from gateway.cache.identity import IDENTITY_RETRY_S, IdentityGuard
from gateway.errors import NotFoundError, TableIdentityMismatchError, UnavailableError
from gateway.identity import ExpectedIdentity
from gateway.models import AccessMode, CacheKey, Outcome, RequestContext
from gateway.settings import CacheSettings
from tests.fakes.rng import seeded
from tests.fakes.tables import FakeTables

CTX = RequestContext(request_id="req-1")
TTL = 30.0


def key(table: str = "orders", access: AccessMode = AccessMode.READ,
        kind: str = "generic") -> CacheKey:
    return CacheKey.of(project=None, warehouse_id="wh", namespace=("ns",), table=table,
                       access=access, kind=kind)  # type: ignore[arg-type]


@pytest.fixture
def tables(clock):
    t = FakeTables(clock)
    t.create("orders")
    return t


@pytest.fixture
def guard(tables, clock, metrics, registry):
    cache = CredentialCache(tables.fetch, CacheSettings(), clock, metrics, registry.spawn,
                            deadline_s=30, rng=seeded(7))
    return IdentityGuard(cache, tables.load, TTL, clock, metrics, registry.spawn, deadline_s=30)


def checks(metrics, result):
    return metrics.registry.get_sample_value("lakegate_identity_checks_total",
                                             {"result": result}) or 0.0


async def test_hits_inside_the_ttl_cost_no_identity_load(guard, tables, clock):
    first = await guard.lookup(key(), CTX)
    for _ in range(50):
        clock.advance(0.5)
        value, outcome, _ = await guard.lookup(key(), CTX)
        assert outcome is Outcome.HIT
        assert value is first[0]
    assert (tables.fetches, tables.loads) == (1, 0)


async def test_a_replaced_table_is_served_new_after_the_ttl(guard, tables, clock, metrics):
    old = (await guard.lookup(key(), CTX))[0]
    new = tables.replace("orders")
    clock.advance(TTL - 1)
    assert (await guard.lookup(key(), CTX))[0].location == old.location  # inside the bound
    clock.advance(1)
    value, outcome, _ = await guard.lookup(key(), CTX)
    assert value.location == new.location
    assert value.table_id == new.table_id  # the load that found the change named the new id
    assert outcome is Outcome.MISS
    assert (tables.fetches, tables.loads) == (2, 1)
    assert checks(metrics, "changed") == 1
    # The refetched answer is confirmed fresh for another TTL.
    clock.advance(TTL - 1)
    assert (await guard.lookup(key(), CTX))[0] is value
    assert tables.loads == 1


async def test_an_unchanged_table_is_confirmed_and_carries_its_id(guard, tables, clock):
    ident = tables.tables["orders"]
    value = (await guard.lookup(key(), CTX))[0]
    clock.advance(TTL)
    confirmed, outcome, _ = await guard.lookup(key(), CTX)
    assert outcome is Outcome.HIT
    assert confirmed.location == value.location
    assert confirmed.credentials is value.credentials  # the same credential, id attached
    assert confirmed.table_id == ident.table_id
    assert (tables.fetches, tables.loads) == (1, 1)
    assert (await guard.lookup(key(), CTX))[0] is confirmed  # stable object: one render


async def test_expected_location_of_the_new_table_refetches_at_once(guard, tables):
    await guard.lookup(key(), CTX)
    new = tables.replace("orders")
    expect = ExpectedIdentity(location=new.location + "/")
    value, outcome, _ = await guard.lookup(key(), CTX, expect)
    assert value.location == new.location
    assert outcome is Outcome.MISS
    # One shared identity load finds the change, one refetch answers it (#35 item 4: a
    # mismatch is confirmed by the load, never by evicting the shared entry first).
    assert (tables.fetches, tables.loads) == (2, 1)


async def test_expected_location_the_catalog_no_longer_has_is_refused(guard, tables, metrics):
    old = (await guard.lookup(key(), CTX))[0]
    tables.replace("orders")
    await guard.lookup(key(), CTX, ExpectedIdentity(location=tables.tables["orders"].location))
    with pytest.raises(TableIdentityMismatchError) as info:
        await guard.lookup(key(), CTX, ExpectedIdentity(location=old.location))
    assert info.value.status == 409
    assert tables.fetches == 2  # refused after the shared load: no vend, the entry stays
    assert metrics.registry.get_sample_value("lakegate_identity_mismatches_total") == 1


async def test_expected_table_id_is_confirmed_or_refused(guard, tables, clock):
    ident = tables.tables["orders"]
    value, _, _ = await guard.lookup(key(), CTX, ExpectedIdentity(table_id=ident.table_id.upper()))
    assert value.table_id == ident.table_id
    assert tables.want_ids == [True]
    old_id = ident.table_id
    new = tables.replace("orders")
    # A matching expectation is a plain hit: confirmed within the TTL like any answer...
    assert (await guard.lookup(key(), CTX, ExpectedIdentity(table_id=old_id)))[0] is value
    clock.advance(TTL)
    # ...and refused once the confirmation finds the catalog's table is another one.
    with pytest.raises(TableIdentityMismatchError):
        await guard.lookup(key(), CTX, ExpectedIdentity(table_id=old_id))
    # The refusal did not leave the old table's credential behind: the next answer is new.
    value, _, _ = await guard.lookup(key(), CTX, ExpectedIdentity(table_id=new.table_id))
    assert (value.location, value.table_id) == (new.location, new.table_id)


async def test_a_herd_after_the_ttl_makes_one_load_and_one_refetch(guard, tables, clock):
    await guard.lookup(key(), CTX)
    new = tables.replace("orders")
    clock.advance(TTL)
    tables.load_gate = asyncio.Event()
    herd = [asyncio.ensure_future(guard.lookup(key(), CTX)) for _ in range(200)]
    await asyncio.sleep(0)
    tables.load_gate.set()
    async with asyncio.timeout(10):
        results = await asyncio.gather(*herd)
    assert {r[0].location for r in results} == {new.location}
    assert (tables.fetches, tables.loads) == (2, 1)


async def test_read_and_write_keys_of_one_table_share_one_load(guard, tables, clock):
    await guard.lookup(key(), CTX)
    await guard.lookup(key(access=AccessMode.WRITE), CTX)
    clock.advance(TTL)
    tables.load_gate = asyncio.Event()
    both = [asyncio.ensure_future(guard.lookup(key(access=a), CTX))
            for a in (AccessMode.READ, AccessMode.WRITE)]
    await asyncio.sleep(0)
    tables.load_gate.set()
    await asyncio.gather(*both)
    assert tables.loads == 1


async def test_a_failed_load_serves_the_cached_entry_and_retries_later(guard, tables, clock,
                                                                       metrics):
    value = (await guard.lookup(key(), CTX))[0]
    clock.advance(TTL)
    tables.load_errors.append(UnavailableError("catalog down"))
    assert (await guard.lookup(key(), CTX))[0] is value
    for _ in range(10):  # no storm while the catalog is down
        assert (await guard.lookup(key(), CTX))[0] is value
    assert tables.loads == 1
    assert checks(metrics, "error") == 1
    clock.advance(IDENTITY_RETRY_S)
    await guard.lookup(key(), CTX)
    assert tables.loads == 2


async def test_a_failed_load_refuses_a_caller_whose_id_needs_it(guard, tables):
    await guard.lookup(key(), CTX)
    tables.load_errors.append(UnavailableError("catalog down"))
    with pytest.raises(UnavailableError):
        await guard.lookup(key(), CTX, ExpectedIdentity(table_id=tables.tables["orders"].table_id))


async def test_a_dropped_table_is_not_served_once_the_load_says_404(guard, tables, clock):
    await guard.lookup(key(), CTX)
    clock.advance(TTL)
    tables.load_errors.append(NotFoundError("no such table"))
    with pytest.raises(NotFoundError):
        await guard.lookup(key(), CTX)
    del tables.tables["orders"]
    tables.create("orders")
    value, outcome, _ = await guard.lookup(key(), CTX)
    assert outcome is Outcome.MISS  # the old entry went with the 404
    assert value.location == tables.tables["orders"].location


async def test_304_confirms_without_refetching(guard, tables, clock, metrics):
    tables.etags = True
    await guard.lookup(key(kind="iceberg"), CTX)
    for _ in range(3):
        clock.advance(TTL)
        await guard.lookup(key(kind="iceberg"), CTX)
    assert tables.loads == 3
    assert checks(metrics, "loaded") == 1
    assert checks(metrics, "not_modified") == 2
    assert tables.fetches == 1


async def test_a_refreshed_value_is_confirmed_before_it_is_served_as_a_hit(guard, tables, clock,
                                                                           registry):
    # A value the guard has not seen and did not see fetched (e.g. stored by refresh-ahead) is
    # confirmed at once: the guard never assumes it is younger than it is.
    await guard.lookup(key(), CTX)
    assert guard._cache.start_refresh(key())
    await registry.drained()
    guard._checked.clear()  # as if evicted from the guard's own bounds
    guard._last.clear()
    new = tables.replace("orders")
    value, _, _ = await guard.lookup(key(), CTX)
    assert value.location == new.location
    assert tables.loads == 1


async def test_a_new_expected_id_replaces_an_entry_confirmed_for_the_old_one(guard, tables):
    old = tables.tables["orders"]
    await guard.lookup(key(), CTX, ExpectedIdentity(table_id=old.table_id))  # old id confirmed
    new = tables.replace("orders")
    value, outcome, _ = await guard.lookup(key(), CTX, ExpectedIdentity(table_id=new.table_id))
    assert (value.location, value.table_id, outcome) == (new.location, new.table_id, Outcome.MISS)
    assert (tables.fetches, tables.loads) == (2, 2)  # one load found the change, one refetch


async def test_a_refresh_ahead_value_keeps_the_last_confirmation(guard, tables, clock, registry):
    # A background refresh stores a new value object; it is newer than the key's last
    # confirmation, so it is not re-checked before that confirmation's due time.
    ident = tables.tables["orders"]
    await guard.lookup(key(), CTX, ExpectedIdentity(table_id=ident.table_id))  # confirmed, id
    assert guard._cache.start_refresh(key())
    await registry.drained()
    value, outcome, _ = await guard.lookup(key(), CTX)
    assert (outcome, tables.fetches, tables.loads) == (Outcome.HIT, 2, 1)
    assert value.table_id == ident.table_id  # same location: the confirmed id carries over
    clock.advance(TTL)
    await guard.lookup(key(), CTX)
    assert tables.loads == 2  # due when the confirmation was, not later


class HeldFetch:
    """FakeTables.fetch, but the next call armed with `hold` reads the catalog at once and
    answers only when the hold is released (a refresh that read the table before it changed)."""

    def __init__(self, tables: FakeTables) -> None:
        self.tables = tables
        self.hold: asyncio.Event | None = None

    async def __call__(self, key: CacheKey, ctx: RequestContext):
        value = await self.tables.fetch(key, ctx)
        hold, self.hold = self.hold, None
        if hold is not None:
            await hold.wait()
        return value


async def test_a_refresh_in_flight_across_a_replacement_is_not_stored_over_the_refetch(
    tables, clock, metrics, registry
):
    # #33 finding 3: evict_if forgot the refresh's flight but not its ticket; the refetch's
    # caller marked that orphaned ticket wanted, and the old table's credential, answered
    # last, was stored over the corrected entry and served for another TTL.
    fetch = HeldFetch(tables)
    cache = CredentialCache(fetch, CacheSettings(), clock, metrics, registry.spawn,
                            deadline_s=30, rng=seeded(7))
    guard = IdentityGuard(cache, tables.load, TTL, clock, metrics, registry.spawn, deadline_s=30)
    old = (await guard.lookup(key(), CTX))[0]
    hold = fetch.hold = asyncio.Event()
    assert cache.start_refresh(key()) is not None  # reads the old table, answers late
    await asyncio.sleep(0)
    new = tables.replace("orders")
    clock.advance(TTL)
    value, _, _ = await guard.lookup(key(), CTX)  # the load finds the change: one refetch
    assert value.location == new.location
    hold.set()
    await registry.drained()
    for _ in range(3):
        clock.advance(1)
        value, _, _ = await guard.lookup(key(), CTX)
        assert value.location == new.location != old.location


async def test_a_confirmation_in_flight_when_the_subscription_drops_gets_the_short_ttl(
    tables, clock, metrics, registry
):
    # #33 finding 5: set_ttl capped the stored records, but a confirmation in flight at the
    # loss held its own copy of the record and wrote back the pre-loss due time (300 s).
    cache = CredentialCache(tables.fetch, CacheSettings(), clock, metrics, registry.spawn,
                            deadline_s=30, rng=seeded(7))
    guard = IdentityGuard(cache, tables.load, TTL, clock, metrics, registry.spawn, deadline_s=30)
    guard.set_ttl(300.0)  # subscribed
    await guard.lookup(key(), CTX)  # filled: confirmed until +300 s, no id yet
    clock.advance(10)
    tables.load_gate = asyncio.Event()
    ident = tables.tables["orders"]
    confirming = asyncio.ensure_future(
        guard.lookup(key(), CTX, ExpectedIdentity(table_id=ident.table_id)))  # loads for the id
    for _ in range(5):
        await asyncio.sleep(0)
    assert tables.loads == 1
    guard.set_ttl(TTL)  # the subscription drops while the load runs
    tables.load_gate.set()
    await confirming
    tables.load_gate = None
    clock.advance(TTL)
    new = tables.replace("orders")  # an unannounced change: the short TTL bounds it
    value, _, _ = await guard.lookup(key(), CTX)
    assert tables.loads == 2
    assert value.location == new.location


def announce(guard: IdentityGuard, table: str = "orders") -> None:
    """What GatewayService.apply_change does for a change event naming `table`."""
    guard.changed("WH", ("NS",), table.upper())  # names as an event spells them: folded here
    guard._cache.invalidate_table("wh", ("ns",), table)


async def test_after_a_change_a_lagging_catalog_is_asked_again_shortly(guard, tables, clock):
    # #33 build item 2: the event's refetch reads a replica that has not seen the re-create.
    guard.set_ttl(300.0)  # subscribed
    old = (await guard.lookup(key(), CTX))[0]
    announce(guard)
    value, outcome, _ = await guard.lookup(key(), CTX)
    assert (value.location, outcome) == (old.location, Outcome.MISS)  # the replica lags
    clock.advance(0.5)
    assert (await guard.lookup(key(), CTX))[1] is Outcome.HIT
    assert tables.loads == 0
    clock.advance(0.5)
    await guard.lookup(key(), CTX)  # 1 s after the change: asked again, still the old table
    assert tables.loads == 1
    new = tables.replace("orders")  # the replica catches up 1.5 s after the change
    clock.advance(1.0)
    value, _, _ = await guard.lookup(key(), CTX)
    assert value.location == new.location
    assert (tables.loads, tables.fetches) == (2, 3)
    # Within the short TTL after the change even a new location is asked again (a replica
    # may be behind two changes); after it, the events TTL holds again.
    clock.advance(250)
    assert (await guard.lookup(key(), CTX))[0].location == new.location
    assert tables.loads == 3
    clock.advance(250)
    assert (await guard.lookup(key(), CTX))[0].location == new.location
    assert (tables.loads, tables.fetches) == (3, 3)


async def test_a_lag_longer_than_the_short_ttl_falls_back_to_the_full_ttl(guard, tables, clock):
    guard.set_ttl(300.0)
    old = (await guard.lookup(key(), CTX))[0]
    announce(guard)
    seen = []
    for _ in range(40):  # the catalog never shows a change (a long lag, or none happened)
        value, _, _ = await guard.lookup(key(), CTX)
        seen.append(tables.loads)
        clock.advance(1.0)
    assert value.location == old.location
    # Asked again 1, 2, 4, 8 and 16 s after the change and when the short TTL ended (30 s):
    # a bounded cost per event, then the full TTL.
    assert tables.loads == 6
    assert (seen[29], seen[30]) == (5, 6)
    clock.advance(250)
    await guard.lookup(key(), CTX)
    assert tables.loads == 6


async def test_a_change_to_another_table_costs_nothing(guard, tables, clock):
    guard.set_ttl(300.0)
    tables.create("other")
    await guard.lookup(key(), CTX)
    announce(guard, "other")
    clock.advance(100)
    assert (await guard.lookup(key(), CTX))[1] is Outcome.HIT
    assert tables.loads == 0


async def test_a_cold_herd_over_many_tables_makes_no_identity_load_within_the_first_ttl(
    guard, tables, clock
):
    # #36 item 3: a caller that reached the guard after the fill stored its entry but before
    # the filling caller recorded it found no record and confirmed at once (27 loads for 50
    # tables on the bench). The fill is the confirmation, whichever caller comes first.
    names = [f"t{i}" for i in range(50)]
    for name in names:
        tables.create(name)

    async def caller(i: int) -> None:
        for n in range(80):  # 200 callers, 80 requests each (the bench's cold herd)
            await guard.lookup(key(names[(i * 3 + n) % len(names)]), CTX)

    async with asyncio.timeout(10):
        await asyncio.gather(*(caller(i) for i in range(200)))
    clock.advance(TTL - 1)
    await asyncio.gather(*(caller(i) for i in range(50)))
    assert tables.fetches == 50
    assert tables.loads == 0


async def test_a_hit_before_the_filling_caller_resumes_is_confirmed_by_the_fill(
    guard, tables, clock
):
    filling = asyncio.ensure_future(guard.lookup(key(), CTX))
    for _ in range(20):
        if key() in guard._cache:  # stored; the filling caller has not resumed yet
            break
        await asyncio.sleep(0)
    assert key() in guard._cache
    assert not filling.done()
    value, outcome, _ = await guard.lookup(key(), CTX)
    assert outcome is Outcome.HIT
    assert (await filling)[0] is value
    assert tables.loads == 0
    clock.advance(TTL - 1)
    await guard.lookup(key(), CTX)
    assert tables.loads == 0
    clock.advance(1)
    await guard.lookup(key(), CTX)
    assert tables.loads == 1  # due a TTL after the fill, not later


async def test_a_callers_wrong_expected_location_costs_other_callers_nothing(
    guard, tables, clock, metrics
):
    # #35 item 4: each refused request evicted the shared entry and vended again before its
    # 409 (20 refused requests, 20 vends), and every other caller of the table paid for it.
    from gateway.models import CallerIdentity

    value = (await guard.lookup(key(), CTX))[0]
    wrong = ExpectedIdentity(location="s3://bucket/wh/not-this-table")
    mallory = CTX._replace(caller=CallerIdentity("mallory", authenticated=True))
    for _ in range(20):
        with pytest.raises(TableIdentityMismatchError):
            await guard.lookup(key(), mallory, wrong)
        clock.advance(0.01)
    assert tables.fetches == 1  # no vend for a wrong plan
    assert tables.loads == 1  # one shared load, then held for the same caller
    hit, outcome, _ = await guard.lookup(key(), CTX)  # everyone else: the same entry
    assert (outcome, hit.location) == (Outcome.HIT, value.location)
    clock.advance(1.0)  # the hold ends: one more load per caller and table at most
    with pytest.raises(TableIdentityMismatchError):
        await guard.lookup(key(), mallory, wrong)
    assert (tables.fetches, tables.loads) == (1, 2)
    assert metrics.registry.get_sample_value("lakegate_identity_mismatches_total") == 21


async def test_a_herd_of_wrong_expectations_shares_one_load(guard, tables):
    await guard.lookup(key(), CTX)
    tables.load_gate = asyncio.Event()
    wrong = ExpectedIdentity(location="s3://bucket/wh/not-this-table")
    herd = [asyncio.ensure_future(guard.lookup(key(), CTX, wrong)) for _ in range(20)]
    await asyncio.sleep(0)
    tables.load_gate.set()
    results = await asyncio.gather(*herd, return_exceptions=True)
    assert all(isinstance(r, TableIdentityMismatchError) for r in results)
    assert (tables.fetches, tables.loads) == (1, 1)


async def test_a_table_first_read_from_a_lagging_catalog_after_its_event_is_asked_again(
    guard, tables, clock
):
    # The guard knew nothing of the table before its event (never served here, or its first
    # fetch was in flight and detached): the first location read after the event is the one
    # that must change, or it would be trusted for the events TTL.
    guard.set_ttl(300.0)
    announce(guard)  # the re-create's event; the replica still has the old table
    old = (await guard.lookup(key(), CTX))[0]
    new = tables.replace("orders")  # the replica catches up
    clock.advance(1.0)
    value, _, _ = await guard.lookup(key(), CTX)
    assert value.location == new.location != old.location
    assert tables.loads == 1


async def test_a_replica_behind_two_changes_is_not_trusted_for_showing_the_first(
    guard, tables, clock
):
    # Found by the coherence model: the replica showed a location that differed from the
    # one known before the event, but was the first of two changes; the guard trusted it.
    guard.set_ttl(300.0)
    await guard.lookup(key(), CTX)
    middle = tables.replace("orders")  # the replica is here...
    announce(guard)  # ...when the second change's event arrives
    value, _, _ = await guard.lookup(key(), CTX)
    assert value.location == middle.location
    last = tables.replace("orders")  # the replica catches up
    clock.advance(2.0)
    assert (await guard.lookup(key(), CTX))[0].location == last.location


async def test_change_windows_that_ended_are_dropped_as_new_changes_come(guard, clock):
    for i in range(50):
        guard.changed("wh", ("ns",), f"t{i}")
        clock.advance(1.0)
    assert len(guard._changed) == 2 * 30  # two kinds per name, of the last 30 s (the window)


async def test_confirmed_now_answers_as_confirmed_and_confirmed_for(guard, tables, clock,
                                                                    registry):
    """The hot path's one-call form gives what the two calls give, in every state: confirmed,
    part-way, a refreshed value under an earlier confirmation, and due (None: confirm)."""

    def both(value):
        served = guard.confirmed(key(), value, None)
        return None if served is None else (served, guard.confirmed_for(key(), served))

    def agree() -> None:
        value = guard._cache.hit(key())[0]
        assert guard.confirmed_now(key(), value) == both(value)

    ident = tables.tables["orders"]
    await guard.lookup(key(), CTX, ExpectedIdentity(table_id=ident.table_id))
    agree()
    assert guard.confirmed_now(key(), guard._cache.hit(key())[0])[1] == TTL
    clock.advance(TTL / 3)
    agree()
    assert guard._cache.start_refresh(key())
    await registry.drained()
    agree()  # the refreshed value object, before and after its hit adopted the confirmation
    await guard.lookup(key(), CTX)
    agree()
    clock.advance(TTL)
    assert guard.confirmed_now(key(), guard._cache.hit(key())[0]) is None
    agree()


def _anonymous(peer: str) -> RequestContext:
    from gateway.models import CallerIdentity

    return CTX._replace(caller=CallerIdentity("anonymous", authenticated=False),
                        peer_key=lambda: peer)


async def test_an_anonymous_process_refusal_never_holds_its_neighbour(guard, tables, clock):
    """Issue 50 item 7: in mode `none` every process is `anonymous`; process A's stale plan
    held the table for process B too, so B, which planned against the re-created table, was
    refused without the catalog being asked."""
    await guard.lookup(key(), CTX)
    a, b = _anonymous("uid:1/pid:100"), _anonymous("uid:1/pid:200")
    with pytest.raises(TableIdentityMismatchError):
        await guard.lookup(key(), a, ExpectedIdentity(location="s3://bucket/wh/stale-plan"))
    new = tables.replace("orders")  # re-created: B planned against the new table
    clock.advance(0.1)
    value, _, _ = await guard.lookup(key(), b, ExpectedIdentity(location=new.location))
    assert value.location == new.location
    loads = tables.loads
    with pytest.raises(TableIdentityMismatchError):  # A itself is still held
        await guard.lookup(key(), a, ExpectedIdentity(location="s3://bucket/wh/stale-plan"))
    assert tables.loads == loads


async def test_a_refusal_within_the_hold_does_not_renew_it(guard, tables, clock):
    await guard.lookup(key(), CTX)
    a = _anonymous("tcp:127.0.0.1:40001")
    wrong = ExpectedIdentity(location="s3://bucket/wh/stale-plan")
    with pytest.raises(TableIdentityMismatchError):
        await guard.lookup(key(), a, wrong)
    assert tables.loads == 1
    for _ in range(9):  # refused at once, every 0.1 s, for the rest of the hold
        clock.advance(0.1)
        with pytest.raises(TableIdentityMismatchError):
            await guard.lookup(key(), a, wrong)
    assert tables.loads == 1
    clock.advance(0.15)  # 1.05 s after the refusal that started the hold: the catalog is asked
    with pytest.raises(TableIdentityMismatchError):
        await guard.lookup(key(), a, wrong)
    assert tables.loads == 2
