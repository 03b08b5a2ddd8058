"""CredentialCache: vended credentials per key, single-flight, serve floor, stale-if-error, LRU.

Windows (see policy.py): in the soft window (remaining < jittered refresh_lead) the entry is
still served and RefreshAhead refreshes it in the background; failures mark it stale (served
with outcome `stale`) while it stays above the floor. At the floor (remaining <= min_remaining)
the entry is dropped and callers wait for one shared fetch; a fetched credential that is
already below the floor is an error, never served. Nothing here ever serves an expired value.

Every window is judged on monotonic time: a credential's epoch-ms expiry becomes a monotonic
deadline when it arrives (policy.expiry_deadline, with the catalog's Date when present), so a
step of the local wall clock neither makes valid entries look expired nor expired ones valid.
"""

from __future__ import annotations

import asyncio
import logging
import random
import uuid
from collections import OrderedDict
from collections.abc import Awaitable, Callable

from gateway.cache import policy
from gateway.cache.entry import Entry, Fetched
from gateway.cache.fetch_tickets import FetchTickets, Ticket
from gateway.cache.negative import NegativeCache
from gateway.cache.table_index import TableIndex, TableMatch
from gateway.clock import Clock
from gateway.clock_skew import ClockSkew
from gateway.concurrency import FlightTimeout, SingleFlight, Spawn
from gateway.errors import (
    CredentialExpiredError,
    GatewayError,
    ProtocolViolationError,
    UpstreamTimeoutError,
)
from gateway.metrics import Metrics
from gateway.models import CacheKey, CredentialSet, Outcome, RequestContext
from gateway.settings import CacheSettings

# Bound once: an enum member looked up on its class costs ~50 ns on 3.11, once per hit.
_HIT, _STALE = Outcome.HIT, Outcome.STALE

log = logging.getLogger(__name__)

Fetcher = Callable[[CacheKey, RequestContext], Awaitable[CredentialSet]]


class CredentialCache:
    """The credential cache (its windows and bounds: docs/contracts.md §3, `CACHE__*`).

    Args:
        fetcher: the upstream call, `(key, ctx) -> CredentialSet`.
        settings: cache windows and bounds.
        clock: time (monotonic for scheduling, wall for vended expiries).
        metrics: the one metrics object.
        spawn: the App's TaskRegistry.spawn (owner of every fetch task).
        deadline_s: how long one caller waits for a shared fetch.
        rng: jitter source.
        skew: the remote clocks heard so far (the IdP's is the third witness of the clock
            rule, policy.expiry_deadline); None: the local clock and the catalog's Date only.
    """

    def __init__(
        self,
        fetcher: Fetcher,
        settings: CacheSettings,
        clock: Clock,
        metrics: Metrics,
        spawn: Spawn,
        *,
        deadline_s: float = 31.0,
        rng: random.Random | None = None,
        skew: ClockSkew | None = None,
    ) -> None:
        self._fetcher = fetcher
        self._skew = skew
        self._settings = settings
        self._clock = clock
        self._metrics = metrics
        self._flight: SingleFlight[CacheKey, Fetched] = SingleFlight(
            spawn, waiting=metrics.singleflight_waiters.inc
        )
        self._deadline_s = deadline_s
        self._rng = rng or random.Random()  # noqa: S311 - jitter, not cryptography
        self._entries: OrderedDict[CacheKey, Entry] = OrderedDict()
        # Hand-rolled LRU for the entries (every request reads one): cachetools' LRUCache.get
        # measured 226 ns a hit against 81 ns for OrderedDict get + move_to_end (timeit, 1,024
        # entries). The negative entries, read only while there are any, use cachetools.
        self._negative = NegativeCache(settings.max_entries)
        self._by_table = TableIndex(self._entries)  # an event costs O(its table's keys)
        self._generation = 0
        self._tickets = FetchTickets(self._flight.forget)
        self._stale_count = 0
        self._wake: asyncio.Event | None = None
        self._planned_scan_mono = float("inf")

    # ------------------------------------------------------------------ reading
    @property
    def generation(self) -> int:
        """Bumped by every invalidation (the metadata cache's epoch). Credential fetches are
        discarded per key instead: only an invalidation of their own key detaches them."""
        return self._generation

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, key: object) -> bool:
        return key in self._entries

    def keys(self) -> list[CacheKey]:
        return list(self._entries)

    def _servable(self, entry: Entry, now_m: float) -> bool:
        if entry.deadline_mono is None:
            return entry.ttl_deadline_mono is not None and now_m < entry.ttl_deadline_mono
        return policy.above_floor(entry.deadline_mono - now_m, self._settings.min_remaining_s)

    def stale_entries(self) -> int:
        """Entries whose last background refresh failed (recounted: O(n), for checks)."""
        return sum(1 for e in self._entries.values() if e.stale)

    def servable_entries(self) -> int:
        """How many entries could be served now (readiness inside the stale budget)."""
        now_m = self._clock.monotonic()
        return sum(1 for e in self._entries.values() if self._servable(e, now_m))

    async def get(self, key: CacheKey, ctx: RequestContext) -> tuple[CredentialSet, Outcome]:
        """A credential set above the floor for `key`, and how it was obtained (see `lookup`)."""
        value, outcome, _ = await self.lookup(key, ctx)
        return value, outcome

    def hit(self, key: CacheKey) -> tuple[CredentialSet, Outcome, float | None] | None:
        """`lookup`'s answer when it is a servable entry (the hot path, no coroutine), else
        None (await `lookup`, which drops an entry below the floor and fetches).

        Raises:
            GatewayError: a negative-cached 404/403 for `key` (as `lookup` does).
        """
        now_m = self._clock.monotonic()
        self._negative.check(key, now_m)
        entry = self._entries.get(key)
        if entry is None or not self._servable(entry, now_m):
            return None
        entry.last_used_mono = now_m
        self._entries.move_to_end(key)
        return (entry.value, _STALE if entry.stale else _HIT,
                policy.remaining_until(now_m, entry.deadline_mono))

    async def lookup(self, key: CacheKey, ctx: RequestContext) -> tuple[
        CredentialSet, Outcome, float | None
    ]:
        """A credential set above the floor for `key`, how it was obtained, and the seconds
        it has left on the monotonic clock (None: no expiry).

        Raises:
            GatewayError: the fetch failed (or a negative-cached 404/403, or the catalog
                vended a credential below the floor: CredentialExpiredError).
            UpstreamTimeoutError: this caller's own deadline passed (the fetch goes on).
        """
        got = self.hit(key)
        if got is not None:
            return got
        reason = "miss"
        if key in self._entries:
            # Below the floor (or past its TTL): never served again.
            self._drop(key, "expired")
            reason = "lazy"
        return await self._wait(key, ctx, reason)

    async def _wait(self, key: CacheKey, ctx: RequestContext, reason: str) -> tuple[
        CredentialSet, Outcome, float | None
    ]:
        self._tickets.want(key)  # a caller waits: its answer is stored whatever started it
        try:
            # A waiter leaving (cancel or own deadline) never cancels the shared fetch.
            fetched, coalesced = await self._flight.run(
                key, lambda: self._fetch_and_store(key, ctx, reason,
                                                   self._tickets.issue(key, wanted=True)),
                timeout_s=self._deadline_s,
            )
        except FlightTimeout as exc:
            raise UpstreamTimeoutError("timed out waiting for the credential fetch") from exc
        return (fetched.value, Outcome.COALESCED if coalesced else Outcome.MISS,
                policy.remaining_until(self._clock.monotonic(), fetched.deadline_mono))

    # ------------------------------------------------------------------ fetching
    async def _fetch_and_store(self, key: CacheKey, ctx: RequestContext,
                               reason: str, ticket: Ticket) -> Fetched:
        try:
            return await self._fetch_and_store_once(key, ctx, reason, ticket)
        finally:
            self._tickets.done(key, ticket)

    async def _fetch_and_store_once(self, key: CacheKey, ctx: RequestContext,
                                    reason: str, ticket: Ticket) -> Fetched:
        sent_m = self._clock.monotonic()
        try:
            value = await self._fetcher(key, ctx)
            now_m = self._clock.monotonic()
            deadline = policy.expiry_deadline(
                value.expires_at_ms, wall_now_s=self._clock.now(), mono_now=now_m,
                server_date_s=value.server_date_s, sent_mono=sent_m,
                reference_now_s=(None if self._skew is None
                                 else self._skew.reference_now("idp", now_m)),
            )
            if not policy.above_floor(policy.remaining_until(now_m, deadline),
                                      self._settings.min_remaining_s):
                raise CredentialExpiredError(
                    "the catalog vended a credential with less than the serve floor left"
                )
        except GatewayError as err:
            self._on_failure(key, err, reason, ticket)
            raise
        except Exception as exc:
            # A bug below (a parser, the wiring): counted, logged and backed off like any
            # failure, and typed for the caller; never swallowed by a background task.
            log.exception("credential fetch failed unexpectedly")
            typed = ProtocolViolationError("the catalog's answer could not be used")
            self._on_failure(key, typed, reason, ticket)
            raise typed from exc
        if not ticket.discarded and (ticket.wanted or key in self._entries):
            # A refresh nobody waited for whose entry was evicted meanwhile (idle, LRU) is not
            # stored: that would make a key nobody uses live another idle window.
            self._store(key, value, deadline, reason, for_request=ticket.wanted)
        if reason != "miss":
            self._metrics.refresh.labels(reason=reason, status="ok").inc()
        return Fetched(value, deadline)

    def _on_failure(self, key: CacheKey, err: GatewayError, reason: str,
                    ticket: Ticket) -> None:
        """One place for failure bookkeeping: metric, negative cache, stale marking."""
        if reason != "miss":
            self._metrics.refresh.labels(reason=reason, status="error").inc()
        if ticket.discarded:
            return
        entry = self._entries.get(key)
        ttl = policy.negative_ttl(err, self._settings.negative_ttl_s)
        if ttl is not None and not (entry is not None and isinstance(err, CredentialExpiredError)):
            # The table is gone or forbidden: the old credential must not be served either.
            # (A short credential only says "not now": an entry still above the floor stays.)
            self._drop(key, "invalidated")
            self._negative.remember(key, err, self._clock.monotonic() + ttl)
            return
        if entry is not None and reason == "ahead":
            if not entry.stale:
                entry.stale = True
                self._count_stale(+1)
            entry.back_off(entry.failures + 1, self._clock.monotonic(), self._rng.random())
            log.warning("background credential refresh failed; serving the current one",
                        extra={"error_type": err.type_name, "failures": entry.failures})

    def _store(self, key: CacheKey, value: CredentialSet, deadline_mono: float | None,
               reason: str = "miss", *, for_request: bool = False) -> None:
        now_m = self._clock.monotonic()
        old = self._entries.pop(key, None)
        if old is not None and old.stale:
            self._count_stale(-1)
        # A background refresh must not make an idle key look used.
        last_used = old.last_used_mono if old is not None else now_m
        lead = policy.jittered_lead(self._settings.refresh_lead_s, self._settings.refresh_jitter,
                                    self._rng.random())
        ttl_deadline = (now_m + self._settings.no_expiry_ttl_s
                        if value.expires_at_ms is None else None)
        entry = Entry(value=value, deadline_mono=deadline_mono, fetched_mono=now_m,
                       last_used_mono=last_used,
                       lead_s=lead, ttl_deadline_mono=ttl_deadline, for_request=for_request)
        if (reason == "ahead" and old is not None and value.expires_at_ms is not None
                and old.value.expires_at_ms is not None
                and value.expires_at_ms <= old.value.expires_at_ms):
            # Lakekeeper reuses a credential for half its validity (STC cache): a refresh
            # inside that window returns the same one. Back off instead of re-asking at once.
            entry.back_off(old.failures + 1, now_m, self._rng.random())
        self._entries[key] = entry
        self._by_table.add(key)
        while len(self._entries) > self._settings.max_entries:
            victim, victim_entry = self._entries.popitem(last=False)
            self._count_drop(victim, "lru", victim_entry)
        self._metrics.cache_entries.set(len(self._entries))
        self._maybe_wake(entry, now_m)

    def _maybe_wake(self, entry: Entry, now_m: float) -> None:
        # Wake the refresher only if this entry falls due before its next planned scan:
        # a burst of fresh misses must not turn into a burst of O(n) scans.
        if self._wake is None:
            return
        if entry.deadline_mono is None:
            return  # lapses after its TTL; the periodic scan evicts it
        due_mono = entry.deadline_mono - entry.lead_s
        if due_mono < self._planned_scan_mono:
            self._wake.set()

    def plan_scan(self, at_mono: float) -> None:
        """The refresher's next scan time (so stores wake it only when needed)."""
        self._planned_scan_mono = at_mono

    def _count_stale(self, delta: int) -> None:
        self._stale_count += delta
        self._metrics.stale_serving.set(self._stale_count)

    # ------------------------------------------------------------------ removal
    def _drop(self, key: CacheKey, reason: str) -> bool:
        entry = self._entries.pop(key, None)
        if entry is None:
            return False
        self._count_drop(key, reason, entry)
        self._metrics.cache_entries.set(len(self._entries))
        return True

    def _count_drop(self, key: CacheKey, reason: str, entry: Entry | None) -> None:
        if entry is not None and entry.stale:
            self._count_stale(-1)
        self._metrics.evictions.labels(reason=reason).inc()

    def invalidate_key(self, key: CacheKey) -> int:
        """Drop one key (and any flight or negative entry for it)."""
        self._generation += 1
        self._tickets.detach(key)
        self._negative.forget(key)
        return int(self._drop(key, "invalidated"))

    def evict_if(self, key: CacheKey, value: CredentialSet) -> bool:
        """Drop `key` and its flight if it holds `value` (a herd starts one refetch).

        The flight is detached with its ticket: a background refresh in flight may have read
        the replaced table, and its answer must not land over the refetch's (a caller waiting
        for the refetch would otherwise mark the orphaned ticket wanted)."""
        entry = self._entries.get(key)
        if entry is None or entry.value is not value:
            return False
        self._generation += 1
        self._tickets.detach(key)
        return self._drop(key, "invalidated")

    def invalidate_table(self, warehouse_id: str, namespace: tuple[str, ...], table: str) -> int:
        """Drop every key of one table (all access modes and delegations): its entries, its
        negative entries and its fetches in flight, whether or not the key has an entry.
        O(the table's keys + fetches in flight), not O(cache): change events call it."""
        self._generation += 1
        match = TableMatch.of(warehouse_id, namespace, table)
        self._tickets.detach_where(match)
        n = 0
        for key in self._by_table.keys_of(match):
            n += int(self._drop(key, "invalidated"))
        self._negative.forget_table(match)
        return n

    def forget_negative(self, warehouse_id: str, namespace: tuple[str, ...], table: str) -> None:
        """Forget one table's negative entries only (its credentials stay)."""
        self._negative.forget_table(TableMatch.of(warehouse_id, namespace, table))

    def invalidate_all(self) -> int:
        """Drop everything, fetches in flight included."""
        self._generation += 1
        self._tickets.detach_where(lambda _: True)
        n = len(self._entries)
        for key in list(self._entries):
            self._drop(key, "invalidated")
        self._negative.clear()
        return n

    # ------------------------------------------------------------------ refresh-ahead support
    def attach_wakeup(self, event: asyncio.Event) -> None:
        """The refresher's event, set when an entry may have become due."""
        self._wake = event

    def scan(self) -> tuple[list[CacheKey], float | None]:
        """Evict idle and expired entries; list hot keys due for a background refresh.

        Returns:
            (due keys, oldest first; seconds until the next entry may become due, or None).
        """
        now_m = self._clock.monotonic()
        due: list[CacheKey] = []
        next_in: float | None = None
        for key, entry in list(self._entries.items()):
            if policy.is_idle(now_m, entry.last_used_mono, self._settings.idle_s):
                self._drop(key, "idle")
                continue
            if not self._servable(entry, now_m):
                if key not in self._flight:
                    self._drop(key, "expired")
                continue
            candidates = [entry.last_used_mono + self._settings.idle_s - now_m]
            left = policy.remaining_until(now_m, entry.deadline_mono)
            if left is None:
                candidates.append((entry.ttl_deadline_mono or now_m) - now_m)
            elif policy.in_soft_window(left, entry.lead_s):
                if key in self._flight:
                    pass
                elif now_m >= entry.next_attempt_mono:
                    due.append(key)
                else:
                    candidates.append(entry.next_attempt_mono - now_m)
            else:
                candidates.append(left - entry.lead_s)
            soonest = min(candidates)
            next_in = soonest if next_in is None else min(next_in, soonest)
        return due, next_in

    def is_due(self, key: CacheKey) -> bool:
        """Still worth refreshing now (it may have been refreshed, dropped or gone idle)."""
        entry = self._entries.get(key)
        if entry is None or key in self._flight:
            return False
        now_m = self._clock.monotonic()
        return (
            self._servable(entry, now_m)
            and not policy.is_idle(now_m, entry.last_used_mono, self._settings.idle_s)
            and policy.in_soft_window(policy.remaining_until(now_m, entry.deadline_mono),
                                      entry.lead_s)
            and now_m >= entry.next_attempt_mono
        )

    def filled_at(self, key: CacheKey, value: CredentialSet) -> float | None:
        """When the entry of `key` holding `value` was stored by a fetch a caller waited for
        (monotonic): that fetch read the catalog's current table. None: another value, or one
        stored by a background refresh."""
        entry = self._entries.get(key)
        if entry is None or entry.value is not value or not entry.for_request:
            return None
        return entry.fetched_mono

    def renewable(self, key: CacheKey, min_left_s: float) -> bool:
        """`Entry.renewable` for `key` (the AWS surface's renewal in `GatewayService`)."""
        entry = self._entries.get(key)
        return entry is not None and entry.renewable(self._clock.monotonic(), min_left_s)

    def start_refresh(self, key: CacheKey) -> asyncio.Task[Fetched] | None:
        """Start a background refresh of `key`, or join the one running; its task (None: no
        entry to refresh)."""
        if key not in self._entries:
            return None
        ctx = RequestContext(request_id=str(uuid.uuid4()), project_id=key.project or None)
        task, _ = self._flight.start(key, lambda: self._fetch_and_store(
            key, ctx, "ahead", self._tickets.issue(key, wanted=False)))
        return task
