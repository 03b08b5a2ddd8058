"""A model-based test of coherence (docs/contracts.md §4, "Table identity"): one real
CredentialCache, RefreshAhead and IdentityGuard in front of a model catalog whose reads lag its
writes by a bounded, changing time, with Lakekeeper's change events delivered, lost,
duplicated, reordered or late, and the subscription dropping and coming back.

The catalog drops, creates and replaces one table name; every new table has a new location.
Credential fetches and identity loads read the catalog when they are sent (through the lag)
and answer when a rule says so, in any order, never later than ROUND_TRIP_S after they were
sent (the upstream deadline). Callers ask without an expectation, or expecting the primary's
current location, or an old one.

The invariant, checked on every answer: its location was the catalog's current one (on the
primary) at some moment within the stated bound before the answer. With L replaced at `c`, an
answer at `t` showing L needs `t - c <= bound`, where the bound is
- with the event of that change delivered at `d`: `d - c` + twice the replica lag + one
  recheck (the lagging-catalog rule) + two round trips (a load and a refetch);
- otherwise: `EVENTS__IDENTITY_TTL_S` while the subscription is up, else
  `CACHE__IDENTITY_TTL_S` from the later of the change and the subscription's loss (never more
  than the long TTL), plus the lag and two round trips.
An answer to a caller who named a location is that location.

`make test` runs the `default` profile (derandomized, no example database, ~20 s here);
`make harden` runs the `harden` profile (600 random examples of up to 80 steps, ~70 s here)
through `LAKEGATE_MODEL_PROFILE=harden`. What the searches found on their own, each with its
fix reverted: the lagging-catalog rule off (#33 build item 2), the random search in ~3 min
(shrunk to 5 steps, replayed below); a rule that trusted any location other than the one known
before the event, the derandomized search of an earlier version of this machine (a replica
behind two changes, replayed below). Not found by either search, caught by their replays:
#33 finding 3 (a refresh in flight across a replacement, ~15 specific steps) and the first
read of a table the guard never served. Finding 5 needs a `table_id` expectation, which this
catalog (generic tables, no ids) does not model: tests/unit/cache/test_identity.py covers it.
The client's memo and the metadata cache are not in this machine.
"""

from __future__ import annotations

import asyncio
import itertools
from dataclasses import dataclass, field
from typing import Any

from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
)

from gateway.cache.credential_cache import CredentialCache
from gateway.cache.expiry import credential_set, storage_credential
from gateway.cache.identity import IdentityGuard
from gateway.cache.refresher import RefreshAhead
from gateway.errors import GatewayError, NotFoundError, TableIdentityMismatchError
from gateway.identity import ExpectedIdentity, TableIdentity, same_location
from gateway.metrics import Metrics
from gateway.models import AccessMode, CacheKey, CredentialSet, RequestContext
from gateway.settings import CacheSettings
from gateway.upstream.table_identity import IdentityAnswer
from tests.fakes.clock import FakeClock
from tests.fakes.model_profiles import model_settings
from tests.fakes.rng import seeded
from tests.fakes.tasks import FakeTaskRegistry

SHORT_TTL_S = 30.0  # CACHE__IDENTITY_TTL_S
LONG_TTL_S = 300.0  # EVENTS__IDENTITY_TTL_S
LAG_MAX_S = 4.0  # the longest the catalog's reads lag its writes here
ROUND_TRIP_S = 5.0  # no upstream call answers later than this after it was sent
RECHECK_S = 1.0  # gateway.cache.identity.LAG_RECHECK_MIN_S
LIFETIME_S = 1600  # refresh-ahead starts 400 s after a fetch (lead 1200 s)
NAME = "t"
CTX = RequestContext(request_id="model")
KEYS = (CacheKey.of(project=None, warehouse_id="wh", namespace=("ns",), table=NAME,
                    access=AccessMode.READ),
        CacheKey.of(project=None, warehouse_id="wh", namespace=("ns",), table=NAME,
                    access=AccessMode.WRITE))

MODEL_SETTINGS = model_settings("identity-model", default=(150, 40), harden=(600, 80))


@dataclass
class Write:
    """One change on the primary: from `at` on, the name has `location` (None: dropped)."""

    n: int
    at: float
    location: str | None
    delivered: float | None = None  # first delivery of its event


@dataclass
class Pending:
    """One upstream call: what it read when sent, answered when a rule says so."""

    sent: float
    answer: asyncio.Future[Any]
    result: Any  # the value, or the error to raise


@dataclass
class Asked:
    key: CacheKey
    expect: str | None
    arrived: float
    task: asyncio.Task[Any]
    checked: bool = False


@dataclass
class Catalog:
    """The primary's history of the name, read through a replica `lag_s` behind."""

    clock: FakeClock
    writes: list[Write] = field(default_factory=list)
    lag_s: float = 0.0
    pending: list[Pending] = field(default_factory=list)
    counter: itertools.count[int] = field(default_factory=lambda: itertools.count(1))

    def location_at(self, t: float) -> str | None:
        current = None
        for w in self.writes:
            if w.at <= t:
                current = w.location
        return current

    def write(self, location: str | None, ago_s: float = 0.0) -> Write:
        w = Write(next(self.counter), self.clock.monotonic() - ago_s, location)
        self.writes.append(w)
        return w

    def replaced(self, location: str) -> Write | None:
        """The write that ended `location` on the primary (None: still current)."""
        live = False
        for w in self.writes:
            if w.location is not None and same_location(w.location, location):
                live = True
            elif live:
                return w
        return None

    def _read(self) -> str | None:
        return self.location_at(self.clock.monotonic() - self.lag_s)

    async def _call(self, result: Any) -> Any:
        fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self.pending.append(Pending(self.clock.monotonic(), fut, result))
        return await fut

    async def fetch(self, key: CacheKey, ctx: RequestContext) -> CredentialSet:
        location = self._read()
        if location is None:
            return await self._call(NotFoundError("no such table"))  # type: ignore[no-any-return]
        ms = int((self.clock.true_now() + LIFETIME_S) * 1000)
        config = {"s3.access-key-id": f"AK{next(self.counter)}", "s3.secret-access-key": "x",
                  "s3.session-token-expires-at-ms": str(ms)}
        value = credential_set([storage_credential(location, config)])
        return await self._call(value)  # type: ignore[no-any-return]

    async def load(self, key: CacheKey, ctx: RequestContext, *, etag: str | None = None,
                   want_id: bool = False) -> IdentityAnswer:
        location = self._read()
        if location is None:
            return await self._call(NotFoundError("no such table"))  # type: ignore[no-any-return]
        return await self._call(  # type: ignore[no-any-return]
            IdentityAnswer(TableIdentity(None, location), None))

    def answer(self, call: Pending) -> None:
        self.pending.remove(call)
        if isinstance(call.result, BaseException):
            call.answer.set_exception(call.result)
        else:
            call.answer.set_result(call.result)


class IdentityModel(RuleBasedStateMachine):
    """The machine; each example gets its own loop, clock, catalog and gateway."""

    def __init__(self) -> None:
        super().__init__()
        self.loop = asyncio.new_event_loop()
        self.clock = FakeClock()
        self.catalog = Catalog(self.clock)
        self.metrics = Metrics()
        self.registry = FakeTaskRegistry()
        cfg = CacheSettings(min_remaining_s=300, refresh_lead_s=1200, idle_s=600,
                            negative_ttl_s=2, refresh_rate_per_s=1000,
                            identity_ttl_s=SHORT_TTL_S)
        self.cache = CredentialCache(self.catalog.fetch, cfg, self.clock, self.metrics,
                                     self.registry.spawn, deadline_s=10_000, rng=seeded(3))
        self.refresher = RefreshAhead(self.cache, cfg, self.clock, self.metrics,
                                      self.registry.spawn)
        self.guard = IdentityGuard(self.cache, self.catalog.load, SHORT_TTL_S, self.clock,
                                   self.metrics, self.registry.spawn, deadline_s=10_000)
        self.up = False
        self.down_since: float | None = None  # the last loss of the subscription
        self.outbox: list[Write] = []  # events published and not yet delivered or lost
        self.asked: list[Asked] = []
        self.tables = itertools.count(1)
        self.answers = 0
        self.catalog.write(self.new_location(), ago_s=100.0)  # every replica has it

    # -- plumbing -------------------------------------------------------------------------
    def new_location(self) -> str:
        return f"s3://bucket/wh/table-{next(self.tables)}"

    def run(self, coro: Any) -> Any:
        return self.loop.run_until_complete(coro)

    def settle(self) -> None:
        self.run(self.clock.settle(40))
        self.check_answers()

    def teardown(self) -> None:
        for a in self.asked:
            a.task.cancel()
        for p in list(self.catalog.pending):
            p.answer.cancel()
        if self.asked:
            self.run(asyncio.wait([a.task for a in self.asked]))
        self.run(self.registry.cancel_all())
        self.loop.close()

    def bound(self, change: Write) -> float:
        """The longest a location may be answered after `change` ended it (module doc)."""
        slack = LAG_MAX_S + 2 * ROUND_TRIP_S
        if self.up:
            base = LONG_TTL_S
        else:
            since = change.at if self.down_since is None else max(change.at, self.down_since)
            base = min(LONG_TTL_S, since - change.at + SHORT_TTL_S)
        bound = base + slack
        if change.delivered is not None:
            seen = (change.delivered - change.at + 2 * max(RECHECK_S, LAG_MAX_S) + RECHECK_S
                    + 2 * ROUND_TRIP_S)
            bound = min(bound, seen)
        return bound

    # -- the answer checks ----------------------------------------------------------------
    def check_answers(self) -> None:
        now = self.clock.monotonic()
        for a in self.asked:
            if a.checked or not a.task.done():
                continue
            a.checked = True
            if a.task.cancelled():
                continue
            exc = a.task.exception()
            if exc is not None:
                assert isinstance(exc, GatewayError), repr(exc)
                assert not isinstance(exc, TableIdentityMismatchError) or a.expect is not None
                continue
            value: CredentialSet = a.task.result()[0]
            self.answers += 1
            if a.expect is not None:
                assert same_location(value.location, a.expect), (
                    f"expected {a.expect}, answered {value.location}")
            change = self.catalog.replaced(value.location)
            if change is None:
                continue
            stale_s = now - change.at
            assert stale_s <= self.bound(change), (
                f"answered {value.location} {stale_s:.1f}s after write #{change.n} replaced "
                f"it (bound {self.bound(change):.1f}s; event delivered at "
                f"{change.delivered}, subscription up={self.up}, lost at {self.down_since})")

    # -- rules: callers -------------------------------------------------------------------
    @initialize(lag=st.sampled_from([0.0, 1.0, LAG_MAX_S]), up=st.booleans())
    def start(self, lag: float, up: bool) -> None:
        """A replica lag and a subscription to start with (both change later)."""
        self.catalog.lag_s = lag
        self.subscription(up)

    @rule(key=st.sampled_from(KEYS), expect=st.sampled_from(["none", "none", "current"]))
    def request_answered(self, key: CacheKey, expect: str) -> None:
        """One request, with the upstream calls it sends answered at once (a quick catalog;
        calls already pending, e.g. a background refresh, stay pending)."""
        before = list(self.catalog.pending)
        self.request(key, 1, expect)
        for _ in range(10):
            mine = [p for p in self.catalog.pending if p not in before]
            if not mine:
                break
            self.catalog.answer(mine[0])
            self.settle()

    @rule(key=st.sampled_from(KEYS), n=st.integers(min_value=1, max_value=3),
          expect=st.sampled_from(["none", "none", "current", "old"]))
    def request(self, key: CacheKey, n: int, expect: str) -> None:
        location: str | None = None
        if expect == "current":
            location = self.catalog.location_at(self.clock.monotonic())
        elif expect == "old":
            olds = [w.location for w in self.catalog.writes if w.location is not None]
            location = olds[0] if olds else None
        exp = ExpectedIdentity(location=location) if location else None
        for _ in range(n):
            task = self.loop.create_task(self.guard.lookup(key, CTX, exp))
            self.asked.append(Asked(key, location, self.clock.monotonic(), task))
        self.settle()

    # -- rules: the catalog ---------------------------------------------------------------
    @rule(how=st.sampled_from(["replace", "replace", "drop", "create"]),
          heard=st.sampled_from(["later", "at once"]))
    def change_table(self, how: str, heard: str = "later") -> None:
        """A change through another node or straight at the catalog: it publishes an event
        (only heard while the subscription is up), delivered by the `event` rule or at once."""
        current = self.catalog.location_at(self.clock.monotonic())
        if how == "drop" and current is None:
            return
        if how == "create" and current is not None:
            return
        w = self.catalog.write(None if how == "drop" else self.new_location())
        if self.up and heard == "at once":
            self.deliver(w)
        elif self.up:
            self.outbox.append(w)
        self.settle()

    @rule(lag=st.sampled_from([0.0, 0.0, 1.0, LAG_MAX_S]))
    def replica_lag(self, lag: float) -> None:
        self.catalog.lag_s = lag

    @precondition(lambda self: bool(self.catalog.pending))
    @rule(data=st.data())
    def upstream_answers(self, data: st.DataObject) -> None:
        self.catalog.answer(data.draw(st.sampled_from(self.catalog.pending)))  # any order
        self.settle()

    # -- rules: change events -------------------------------------------------------------
    def deliver(self, w: Write) -> None:
        """What GatewayService.apply_change does with an event."""
        if w.delivered is None:
            w.delivered = self.clock.monotonic()
        self.guard.changed("WH", ("NS",), NAME.upper())  # names as the event spells them
        self.cache.invalidate_table("wh", ("ns",), NAME)

    @precondition(lambda self: bool(self.outbox) and self.up)
    @rule(data=st.data(), what=st.sampled_from(["deliver", "deliver", "duplicate", "lose"]))
    def event(self, data: st.DataObject, what: str) -> None:
        w = data.draw(st.sampled_from(self.outbox))  # any order: reordered and late too
        if what != "duplicate":
            self.outbox.remove(w)
        if what != "lose":
            self.deliver(w)
        self.settle()

    @rule(up=st.booleans())
    def subscription(self, up: bool) -> None:
        if up == self.up:
            return
        self.up = up
        if not up:
            self.down_since = self.clock.monotonic()
            self.outbox.clear()  # published while down: never heard
        self.guard.set_ttl(LONG_TTL_S if up else SHORT_TTL_S)
        self.settle()

    # -- rules: time ----------------------------------------------------------------------
    @rule(seconds=st.sampled_from([0.5, 1.0, 2.0, 4.0, 10.0, 31.0, 301.0, 1000.0]))
    def time_passes(self, seconds: float) -> None:
        """Time passes; calls that would outlive the round trip answer first; the refresher
        makes one pass."""
        now = self.clock.monotonic()
        for _ in range(50):  # an answer may send the next call (a load, then a refetch)
            late = [p for p in self.catalog.pending if now + seconds - p.sent > ROUND_TRIP_S]
            if not late:
                break
            self.catalog.answer(late[0])
            self.settle()
        self.clock.advance(seconds)
        self.run(self.refresher.run_once())
        self.settle()

    @invariant()
    def no_call_outlives_the_round_trip(self) -> None:
        now = self.clock.monotonic()
        assert all(now - p.sent <= ROUND_TRIP_S for p in self.catalog.pending)


IdentityModel.TestCase.settings = MODEL_SETTINGS
TestIdentityModel = IdentityModel.TestCase


class _Pick:
    """Stands in for hypothesis' `data` in a replay: draws the element at `index`."""

    def __init__(self, index: int) -> None:
        self.index = index

    def draw(self, strategy: Any) -> Any:
        inner = getattr(strategy, "wrapped_strategy", strategy)
        if hasattr(inner, "elements"):
            return inner.elements[self.index]
        return inner.value  # a one-element list: hypothesis' just()


def replay(*steps: tuple[str, dict[str, Any]]) -> None:
    """Run one sequence of rules with the invariant checked after each step."""
    machine = IdentityModel()
    try:
        for name, kwargs in steps:
            getattr(machine, name)(**kwargs)
            machine.no_call_outlives_the_round_trip()
    finally:
        machine.teardown()


READ = KEYS[0]
NEWEST, OLDEST = {"data": _Pick(-1)}, {"data": _Pick(0)}


def test_replay_a_refresh_across_a_replacement_is_not_stored_after_the_event() -> None:
    """#33 finding 3: the refresh (sent before the replacement) lost its flight but kept its
    ticket when the expectation's refetch evicted the entry; the refetch's caller marked
    that ticket wanted, the event then detached only the refetch's, and the old credential
    landed last and was served for the events TTL."""
    replay(("subscription", {"up": True}),
           ("request", {"key": READ, "n": 1, "expect": "none"}),
           ("upstream_answers", OLDEST),
           ("time_passes", {"seconds": 301.0}),
           ("request", {"key": READ, "n": 1, "expect": "none"}),  # confirms (a load)
           ("upstream_answers", OLDEST),
           ("time_passes", {"seconds": 301.0}),  # in the soft window: the refresh is sent
           ("change_table", {"how": "replace"}),
           ("request", {"key": READ, "n": 1, "expect": "current"}),  # a load finds it
           ("upstream_answers", NEWEST),
           ("upstream_answers", NEWEST),  # the refetch
           ("event", {**OLDEST, "what": "deliver"}),
           ("upstream_answers", OLDEST),  # the refresh, with the old table
           ("time_passes", {"seconds": 31.0}),
           ("request", {"key": READ, "n": 1, "expect": "none"}))


def test_replay_a_lagging_read_after_a_delivered_event_is_asked_again_shortly() -> None:
    """#33 build item 2: the event's refetch read a replica behind the change and was trusted
    for the events TTL."""
    replay(("subscription", {"up": True}),
           ("time_passes", {"seconds": 10.0}),
           ("request", {"key": READ, "n": 1, "expect": "none"}),
           ("upstream_answers", OLDEST),
           ("replica_lag", {"lag": LAG_MAX_S}),
           ("change_table", {"how": "replace"}),
           ("event", {**OLDEST, "what": "deliver"}),
           ("request", {"key": READ, "n": 1, "expect": "none"}),  # reads the old table
           ("upstream_answers", OLDEST),
           ("time_passes", {"seconds": 31.0}),
           ("request", {"key": READ, "n": 1, "expect": "none"}))


def test_replay_a_table_first_read_after_its_event_from_a_lagging_replica() -> None:
    """The guard knew nothing of the table when the event came (its first fetch was in
    flight): the first location read after the event must still be asked again."""
    replay(("subscription", {"up": True}),
           ("time_passes", {"seconds": 10.0}),
           ("replica_lag", {"lag": LAG_MAX_S}),
           ("request", {"key": READ, "n": 1, "expect": "none"}),  # in flight at the change
           ("change_table", {"how": "replace"}),
           ("event", {**OLDEST, "what": "deliver"}),
           ("upstream_answers", OLDEST),
           ("request", {"key": READ, "n": 1, "expect": "none"}),  # reads the old table
           ("upstream_answers", OLDEST),
           ("time_passes", {"seconds": 31.0}),
           ("request", {"key": READ, "n": 1, "expect": "none"}))


def test_replay_a_replica_behind_two_changes() -> None:
    """Found by the search (derandomized default profile) when the lagging-catalog rule
    trusted any location other than the one known before the event: the replica, 1 s
    behind, showed the first of two changes."""
    replay(("start", {"lag": 1.0, "up": False}),
           ("change_table", {"how": "replace", "heard": "later"}),
           ("request_answered", {"key": READ, "expect": "none"}),
           ("time_passes", {"seconds": 31.0}),
           ("request", {"key": READ, "n": 1, "expect": "none"}),  # a load, in flight
           ("subscription", {"up": True}),
           ("change_table", {"how": "replace", "heard": "later"}),
           ("event", {**OLDEST, "what": "deliver"}),
           ("request_answered", {"key": READ, "expect": "none"}),
           ("time_passes", {"seconds": 31.0}),
           ("request_answered", {"key": READ, "expect": "none"}))


def test_replay_the_shortest_lagging_read_after_an_event() -> None:
    """What the random (harden) search shrank to on its own with the lagging-catalog rule
    off: a replica 1 s behind, the event heard at once, the refetch reading the old table."""
    replay(("start", {"lag": 1.0, "up": True}),
           ("change_table", {"how": "replace", "heard": "at once"}),
           ("request_answered", {"key": READ, "expect": "none"}),
           ("time_passes", {"seconds": 31.0}),
           ("request_answered", {"key": READ, "expect": "none"}))
