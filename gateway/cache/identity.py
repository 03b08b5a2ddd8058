"""IdentityGuard: a cached credential is served only for the table the catalog has now.

The cache keys credentials by table *name*. When a table is dropped and created again, or
renamed away and its name reused, the name stays and the location changes: an entry fetched
before would hand out a credential for the dropped table's prefix (docs/contracts.md §3,
"Table identity"). The guard sits between the service and the cache and binds every answer to
a table identity:

- The identity's location is the credential's own prefix (the same fetch), never another
  call's. A table id is attached only from a metadata load that reported that very location.
- A hot key's identity is re-checked with one metadata load (no STS call; Iceberg loads send
  `If-None-Match` and take a 304) at most once per `cache.identity_ttl_s`. The load is
  single-flighted per table, and every caller arriving while it runs waits for it, so no
  answer is older than the TTL. A changed location drops the entry and refetches once (one
  flight for the herd). A failed load serves the cached entry (the catalog may be down) and is
  retried after `IDENTITY_RETRY_S`; a 404/403 drops it.
- After a change to a table (its change event, or a mutation through this gateway), the
  catalog may still answer from a read replica that has not seen it, or not all of it (a
  replica may be behind more than one change). Any identity read within the short TTL (the
  guard's TTL without events) after the change is then trusted only for LAG_RECHECK_MIN_S,
  then for doubling delays, until that window ends; only the location a create through this
  gateway answered is trusted at once.
- A caller that names the identity it expects (`expected_location` / `table_id`) is answered
  with that identity or refused with `TableIdentityMismatchError` (409). A location that
  differs from the cached one is checked with the shared identity load: the entry is evicted
  and fetched again only if the catalog's table changed, so a wrong plan never costs the
  other callers of the table a vend.
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from dataclasses import replace
from typing import NamedTuple, Protocol

from gateway.cache import policy
from gateway.cache.credential_cache import CredentialCache
from gateway.clock import Clock
from gateway.concurrency import FlightTimeout, SingleFlight, Spawn
from gateway.errors import (
    GatewayError,
    ProtocolViolationError,
    TableIdentityMismatchError,
    UpstreamTimeoutError,
)
from gateway.identity import ExpectedIdentity, TableIdentity, same_location
from gateway.metrics import Metrics
from gateway.models import CacheKey, CredentialSet, Outcome, RequestContext, TableKind
from gateway.names import fold_namespace, fold_table
from gateway.upstream.table_identity import IdentityAnswer

log = logging.getLogger(__name__)

# After a failed identity load, the cached entry is served and the load retried this much later
# (at most the TTL), so an unreachable catalog costs one load per table per period, not a storm.
IDENTITY_RETRY_S = 5.0

# A caller refused (409) for a table is refused again without a catalog call for this long.
MISMATCH_HOLD_S = 1.0

# After a change, an identity read is confirmed again this long after the change at the earliest
# (then after doubling delays, within the short TTL).
LAG_RECHECK_MIN_S = 1.0

TableKey = tuple[str, str, tuple[str, ...], str, str]
NameKey = tuple[str, tuple[str, ...], str, str]  # warehouse id, namespace, table, kind (folded)
_KINDS: tuple[TableKind, ...] = ("generic", "iceberg")
Lookup = tuple[CredentialSet, Outcome, float | None]


class IdentityLoad(Protocol):
    """`TableIdentityLoader.load` (tests pass a fake)."""

    async def __call__(self, key: CacheKey, ctx: RequestContext, *, etag: str | None = ...,
                       want_id: bool = ...) -> IdentityAnswer: ...


class _Checked(NamedTuple):
    """What the guard knows about one cache key's current value."""

    source: CredentialSet  # the cache's value this record is about (compared by identity)
    served: CredentialSet  # `source`, with the table id once one was confirmed
    due_mono: float  # the identity must be confirmed again from this moment


class _Changed(NamedTuple):
    """A recent change to one table name."""

    at_mono: float
    until_mono: float  # after this, an answer is trusted for the full TTL again
    after: str | None  # the location the change made, when this gateway made it


def _holder(ctx: RequestContext) -> str:
    """Whose refusal hold a request meets: its caller, or for an anonymous caller (mode
    `none`: every local process is `anonymous`) its connection or Unix-socket process, so one
    process's stale plan never holds a neighbour's requests."""
    caller = ctx.caller
    if caller is None:
        return ""
    if caller.authenticated or ctx.peer_key is None:
        return caller.name
    return f"{caller.name}@{ctx.peer_key()}"


def name_key(key: CacheKey) -> NameKey:
    """The table name a change event or a mutation names (the project is in the warehouse)."""
    return (key.warehouse_id, key.namespace, key.table, key.kind)


def table_key(key: CacheKey) -> TableKey:
    """The table a cache key belongs to (every access mode and delegation share it)."""
    return (key.project, key.warehouse_id, key.namespace, key.table, key.kind)


def _left_s(last: _Checked | None, served: CredentialSet, now_m: float) -> float:
    """Seconds from `now_m` until `last` (a key's latest record) is due, if it is the record
    of `served` (what it serves or what it was confirmed from); else 0 (unknown)."""
    if last is None or (last.served is not served and last.source is not served):
        return 0.0
    return max(0.0, last.due_mono - now_m)


class IdentityGuard:
    """Binds the cache's answers to the catalog's current table identity (module docstring).

    Args:
        cache: the credential cache.
        load: the identity load (`TableIdentityLoader.load`).
        ttl_s: the longest an identity goes unconfirmed (`cache.identity_ttl_s`).
        clock, metrics, spawn: as everywhere.
        deadline_s: how long one caller waits for a shared identity load.
        max_entries: bound of the per-key and per-table records.
    """

    def __init__(self, cache: CredentialCache, load: IdentityLoad, ttl_s: float, clock: Clock,
                 metrics: Metrics, spawn: Spawn, *, deadline_s: float = 31.0,
                 max_entries: int = 10_000) -> None:
        self._cache = cache
        self._load = load
        self._ttl_s = ttl_s
        self._short_s = ttl_s  # the TTL without events: the window a replica may lag in
        self._clock = clock
        self._metrics = metrics
        self._deadline_s = deadline_s
        self._max = max_entries
        # Keyed by id() of the cache's value (the record holds that value, so the id stays its
        # own): an int hashes in half the time of a CacheKey, and this is read on every hit.
        self._checked: OrderedDict[int, _Checked] = OrderedDict()
        # The latest record per key, for a value the guard has not seen (slow path only).
        self._last: OrderedDict[CacheKey, _Checked] = OrderedDict()
        self._known: OrderedDict[TableKey, tuple[TableIdentity, str | None]] = OrderedDict()
        self._flight: SingleFlight[tuple[TableKey, bool], TableIdentity] = SingleFlight(spawn)
        self._changed: OrderedDict[NameKey, _Changed] = OrderedDict()
        self._refused: OrderedDict[tuple[str, TableKey], float] = OrderedDict()  # hold until

    @property
    def ttl_s(self) -> float:
        return self._ttl_s

    def set_ttl(self, ttl_s: float) -> None:
        """A new TTL (change events subscribed or lost); a shorter one also caps every entry
        already confirmed, so losing the events shortens the bound at once."""
        if ttl_s < self._ttl_s:
            cap = self._clock.monotonic() + ttl_s
            for records in (self._checked, self._last):
                for k, rec in records.items():
                    if rec.due_mono > cap:
                        records[k] = rec._replace(due_mono=cap)  # type: ignore[index]
        self._ttl_s = ttl_s

    def changed(self, warehouse_id: str, namespace: tuple[str, ...], table: str, *,
                after: str | None = None) -> None:
        """The catalog changed this table (an event, or a mutation through this gateway): what
        it answers during the short TTL is confirmed again shortly (but `after`, the location
        a create here answered). Comparing with the location known before is not enough: a
        replica behind two changes shows a location that differs and is still old."""
        now_m = self._clock.monotonic()
        while self._changed:  # oldest first (every window is as long): drop the ended ones
            first = next(iter(self._changed.values()))
            if first.until_mono > now_m:
                break
            self._changed.popitem(last=False)
        wid, ns = warehouse_id.lower(), fold_namespace(namespace)
        for kind in _KINDS:
            nk = (wid, ns, fold_table(table, plus_is_space=kind == "iceberg"), kind)
            self._changed[nk] = _Changed(now_m, now_m + self._short_s, after)
            self._changed.move_to_end(nk)
            while len(self._changed) > self._max:
                self._changed.popitem(last=False)

    def _trust_s(self, key: CacheKey, location: str, now_m: float) -> float:
        """How long an identity the catalog reported just now is trusted: the TTL, or less
        shortly after a change (a lagging replica may not show it yet)."""
        if not self._changed:
            return self._ttl_s
        nk = name_key(key)
        change = self._changed.get(nk)
        if change is None:
            return self._ttl_s
        if now_m >= change.until_mono or (change.after is not None
                                          and same_location(location, change.after)):
            del self._changed[nk]  # the window has passed, or the change's own location
            return self._ttl_s
        return min(self._ttl_s, change.until_mono - now_m,
                   max(LAG_RECHECK_MIN_S, now_m - change.at_mono))

    async def lookup(self, key: CacheKey, ctx: RequestContext,
                     expect: ExpectedIdentity | None = None) -> Lookup:
        """The cache's answer for `key`, its identity confirmed within the TTL (and equal to
        `expect` when given).

        Raises:
            TableIdentityMismatchError: the catalog's table is not the expected one.
            GatewayError: as `CredentialCache.lookup`, or the identity load (404/403).
        """
        got = await self._cache.lookup(key, ctx)
        served = self.confirmed(key, got[0], expect)
        if served is not None:
            return served, got[1], got[2]
        return await self.confirm(key, ctx, expect, got)

    def confirmed(self, key: CacheKey, value: CredentialSet,
                  expect: ExpectedIdentity | None) -> CredentialSet | None:
        """The hot path, without a coroutine: what to serve for the cache's `value` if its
        identity was confirmed within the TTL and nothing is expected, else None (`confirm`)."""
        rec = self._checked.get(id(value))
        if (expect is None and rec is not None and rec.source is value
                and self._clock.monotonic() < rec.due_mono):
            return rec.served
        return None

    def confirmed_now(self, key: CacheKey,
                      value: CredentialSet) -> tuple[CredentialSet, float] | None:
        """`confirmed(key, value, None)` and `confirmed_for` of what it serves, on one clock
        read (the cached-credential hot path asks both): (served, seconds until due), or None
        (await `confirm`)."""
        rec = self._checked.get(id(value))
        if rec is None or rec.source is not value:
            return None
        now_m = self._clock.monotonic()
        if now_m >= rec.due_mono:
            return None
        served = rec.served
        return served, _left_s(self._last.get(key), served, now_m)

    def confirmed_for(self, key: CacheKey, served: CredentialSet) -> float:
        """Seconds from now until `served` (this guard's answer for `key`) is due to be
        confirmed again: how long a caller may keep using its identity (0 when unknown)."""
        return _left_s(self._last.get(key), served, self._clock.monotonic())

    # ------------------------------------------------------------------ the slow path
    async def confirm(self, key: CacheKey, ctx: RequestContext,
                      expect: ExpectedIdentity | None, got: Lookup) -> Lookup:
        """The slow path: confirm the identity (one shared load), refetch at most once.

        A caller whose expected location differs from the cached one is answered after the
        shared identity load, not by evicting the entry every caller uses and vending again:
        if the catalog still has the cached table, the caller's plan is the stale one (409),
        and the same caller refused again for that table within MISMATCH_HOLD_S is refused
        without a load."""
        value = got[0]
        rec = self._record(key, value, got[1])
        refetched = False
        ident: TableIdentity | None = None  # this call's load, if it made one
        want_id = expect is not None and expect.table_id is not None
        while True:
            loc_differs = expect is not None and expect.location_differs(value.location)
            if loc_differs and (refetched or self._held(key, ctx)):
                raise self._refuse(key, ctx, "location")
            if ident is not None and same_location(ident.location, value.location):
                rec = self._confirmed(key, rec, ident, rec.due_mono)
            now_m = self._clock.monotonic()
            id_unsure = want_id and (rec.served.table_id is None or (
                expect is not None and expect.id_differs(rec.served.table_id)))
            if (ident is None and expect is not None and rec.served.table_id is not None
                    and expect.id_differs(rec.served.table_id) and self._held(key, ctx)):
                raise self._refuse(key, ctx, "id")
            if ident is None and (now_m >= rec.due_mono or id_unsure or loc_differs):
                ttl_s = self._ttl_s  # a load started under the events TTL gets no more after
                try:
                    ident = await self._identity(key, ctx, want_id=want_id)
                except (GatewayError, FlightTimeout) as err:
                    if policy.negative_ttl(err, 1.0) is not None:
                        self._cache.evict_if(key, value)  # the table is gone or forbidden
                        raise
                    if want_id or loc_differs:  # the caller's table cannot be confirmed
                        if isinstance(err, FlightTimeout):
                            raise UpstreamTimeoutError("timed out checking the table") from err
                        raise
                    rec = self._keep(key, rec._replace(
                        due_mono=now_m + min(IDENTITY_RETRY_S, self._ttl_s)))
                    log.warning("table identity check failed; serving the cached credential",
                                extra={"error_type": type(err).__name__})
                    return rec.served, got[1], got[2]
                if same_location(ident.location, value.location):
                    trust_s = min(ttl_s, self._trust_s(key, ident.location, now_m))
                    rec = self._confirmed(key, rec, ident, now_m + trust_s)
                    if loc_differs:  # the catalog has the cached table: the plan is stale
                        raise self._refuse(key, ctx, "location")
                elif refetched:
                    # Changed again between our fetch and our load: answer the fetch (newer
                    # than the entry) and confirm again on the next request.
                    rec = self._keep(key, rec._replace(due_mono=now_m))
                else:
                    self._metrics.identity_checks.labels("changed").inc()
                    got, refetched = await self._refetch(key, ctx, value), True
                    value, rec = got[0], self._record(key, got[0], got[1])
                    continue
            return self._final(key, ctx, rec, expect), got[1], got[2]

    def _confirmed(self, key: CacheKey, rec: _Checked, ident: TableIdentity,
                   due_mono: float) -> _Checked:
        """`rec` confirmed by a load that reported its location: attach the id, set the due."""
        value = rec.source
        served = rec.served
        if ident.table_id is not None and served.table_id != ident.table_id:
            served = replace(value, table_id=ident.table_id)
        return self._keep(key, _Checked(value, served, max(due_mono, rec.due_mono)))

    def _final(self, key: CacheKey, ctx: RequestContext, rec: _Checked,
               expect: ExpectedIdentity | None) -> CredentialSet:
        if expect is not None:
            if expect.location_differs(rec.served.location):
                raise self._refuse(key, ctx, "location")
            if expect.table_id is not None and (rec.served.table_id is None
                                                or expect.id_differs(rec.served.table_id)):
                raise self._refuse(key, ctx, "id")
        return rec.served

    def _held(self, key: CacheKey, ctx: RequestContext) -> bool:
        """This caller (`_holder`) was refused for this table less than MISMATCH_HOLD_S ago."""
        if not self._refused:
            return False
        until = self._refused.get((_holder(ctx), table_key(key)))
        return until is not None and self._clock.monotonic() < until

    def _refuse(self, key: CacheKey, ctx: RequestContext,
                what: str) -> TableIdentityMismatchError:
        """The 409 for a caller whose expectation is not the catalog's table; its next ones
        for this table are refused without a load until MISMATCH_HOLD_S after the refusal
        that started the hold (a wrong plan repeated costs the catalog nothing more). A
        refusal within the hold does not renew it: the catalog is asked again once it ends,
        so a plan that became right (or a table that changed) is seen within the hold."""
        held = (_holder(ctx), table_key(key))
        now_m = self._clock.monotonic()
        until = self._refused.get(held)
        if until is None or now_m >= until:
            self._refused[held] = now_m + MISMATCH_HOLD_S
        self._refused.move_to_end(held)
        while len(self._refused) > self._max:
            self._refused.popitem(last=False)
        return self._mismatch(what)

    def _mismatch(self, what: str) -> TableIdentityMismatchError:
        self._metrics.identity_mismatches.inc()
        return TableIdentityMismatchError(
            f"the catalog's table has another {what} than the expected one (it was dropped, "
            "replaced or renamed): plan against the current table"
        )

    def _record(self, key: CacheKey, value: CredentialSet, outcome: Outcome) -> _Checked:
        """The record for the value the cache gave. A value fetched for a request (this one,
        or another whose caller has not reached the guard yet) is fresh for a TTL from its
        fill. One fetched in the background (refresh-ahead) is newer than the key's last
        confirmation, so it keeps that confirmation's due time (and its id, if the location is
        the same); with no record at all it is due at once."""
        rec = self._checked.get(id(value))
        if rec is not None and rec.source is value:
            return rec
        now_m = self._clock.monotonic()
        if outcome is Outcome.MISS or outcome is Outcome.COALESCED:
            return self._keep(key, _Checked(value, value,
                                            now_m + self._trust_s(key, value.location, now_m)))
        filled_m = self._cache.filled_at(key, value)
        if filled_m is not None:  # the fill is the confirmation, whoever reaches here first
            return self._keep(key, _Checked(
                value, value, filled_m + self._trust_s(key, value.location, filled_m)))
        last = self._last.get(key)
        if last is None:
            return self._keep(key, _Checked(value, value, now_m))
        served = value
        if (last.served.table_id is not None
                and same_location(last.served.location, value.location)):
            served = replace(value, table_id=last.served.table_id)
        return self._keep(key, _Checked(value, served, last.due_mono))

    def _keep(self, key: CacheKey, rec: _Checked) -> _Checked:
        # No record is ever due later than a TTL from now: a confirmation in flight when the
        # subscription dropped (set_ttl) must not write back its pre-loss due time.
        cap = self._clock.monotonic() + self._ttl_s
        if rec.due_mono > cap:
            rec = rec._replace(due_mono=cap)
        vid = id(rec.source)
        self._checked[vid] = rec
        self._checked.move_to_end(vid)
        while len(self._checked) > self._max:
            self._checked.popitem(last=False)
        self._last[key] = rec
        self._last.move_to_end(key)
        while len(self._last) > self._max:
            self._last.popitem(last=False)
        return rec

    async def _refetch(self, key: CacheKey, ctx: RequestContext, stale: CredentialSet) -> Lookup:
        """One shared refetch of a key whose cached value belongs to a replaced table."""
        self._cache.evict_if(key, stale)
        return await self._cache.lookup(key, ctx)

    async def _identity(self, key: CacheKey, ctx: RequestContext, *,
                        want_id: bool) -> TableIdentity:
        tk = table_key(key)
        ident, _ = await self._flight.run(
            (tk, want_id), lambda: self._load_identity(key, tk, ctx, want_id),
            timeout_s=self._deadline_s,
        )
        return ident

    async def _load_identity(self, key: CacheKey, tk: TableKey, ctx: RequestContext,
                             want_id: bool) -> TableIdentity:
        known = self._known.get(tk)
        try:
            answer = await self._load(key, ctx, etag=known[1] if known else None,
                                      want_id=want_id)
        except BaseException:
            self._metrics.identity_checks.labels("error").inc()
            raise
        if answer.identity is None and known is not None:  # 304: unchanged since the ETag
            self._metrics.identity_checks.labels("not_modified").inc()
            return known[0]
        if answer.identity is None:
            raise ProtocolViolationError("the catalog answered 304 to a load without an ETag")
        self._metrics.identity_checks.labels("loaded").inc()
        self._known[tk] = (answer.identity, answer.etag)
        self._known.move_to_end(tk)
        while len(self._known) > self._max:
            self._known.popitem(last=False)
        return answer.identity
