"""The audit trail: `lakegate.audit` log lines that attribute every credential decision.

Why: a credential grant is the one act an operator must be able to attribute afterwards (who got
which table's storage keys, for reading or writing), and so is a refusal (who tried). Each line
names the caller, the table (folded, gateway/names.py), the access, the surface and the outcome
(`hit`/`miss`/`coalesced`/`stale` for a grant, `denied` for a policy refusal, the error type
when the service refused or failed, e.g. `NotFoundError`) and never a credential or a token.

Two kinds of line (docs/contracts.md §6 states the promise):

- one line per decision for every miss, stale answer, error, policy refusal and every
  write-access grant (`AuditTrail.credential` writes them at once; the Gate, surfaces/ingress.py,
  writes refusals through `credential_event`);
- folded lines for read grants served without an upstream call of their own (`hit`, and
  `coalesced`: a waiter on another request's fetch, whose miss has its own line): one line per
  (caller, table, access, outcome, surface) per `LOG__AUDIT_INTERVAL_S` with `count`,
  `first_ts` and `last_ts`. Why: a cached hit costs a few microseconds to serve, and a full log
  line cost as much again (one bench run: cached HTTP/UDS at 9.7k req/s with a line per hit,
  about 23k without); a folded hit is one dict update. An owned background task flushes the fold
  every interval, when it holds `AUDIT_FOLD_MAX_KEYS` keys, and on shutdown (`close`), so every
  request served is in exactly one line's count. `LOG__AUDIT_INTERVAL_S=0` keeps one line per
  request for everything.

`LAKEGATE__LOG__AUDIT=false` turns every line off; operators may also set the `lakegate.audit`
logger above INFO.

In per-request mode a coalesced waiter's line (`defer=True`) is written just after the waiter is
answered (`loop.call_soon`), so a herd of K waiters is answered first and audited after; order is
kept (call_soon is FIFO) and every decision still gets its line.
"""

from __future__ import annotations

import asyncio
import logging
from contextvars import ContextVar, Token
from datetime import UTC, datetime
from typing import Any

from gateway.clock import Clock
from gateway.concurrency import Spawn
from gateway.models import AccessMode, CallerIdentity, Outcome, RequestContext, Scope
from gateway.names import fold, fold_namespace

AUDIT_LOGGER = "lakegate.audit"
DENIED = "denied"  # the outcome of a policy refusal
# A bound on distinct fold keys between flushes (memory); reaching it flushes early.
AUDIT_FOLD_MAX_KEYS = 10_000
# A node-local or forwarded signature of a read is as frequent as a hit (one per S3 request).
_FOLDED_OUTCOMES = frozenset({Outcome.HIT.value, Outcome.COALESCED.value, "signed-local",
                              "signed-forwarded"})
# Enum members bound once: on Python 3.11 `AccessMode.READ` costs ~0.4 µs and `.value` ~1 µs
# (measured here), a visible share of a folded hit.
_READ = AccessMode.READ
_log = logging.getLogger(AUDIT_LOGGER)

# (caller, warehouse, namespace levels, table, access, outcome, surface)
FoldKey = tuple[str, str, tuple[str, ...], str | None, AccessMode, str, str]


def configure_audit(enabled: bool) -> None:
    """Turn the audit lines on (INFO, whatever LOG__LEVEL says) or off (LOG__AUDIT=false)."""
    _log.setLevel(logging.INFO if enabled else logging.WARNING)


def folded_scope(table: Scope) -> dict[str, Any]:
    """The audit fields of `table` in the comparison form (gateway/names.py `fold`), the form
    the policy decided on and the cache keyed on: every spelling of one table is one name in
    the audit too."""
    warehouse, namespace, name = table
    return {"warehouse": fold(warehouse), "namespace": ".".join(fold_namespace(namespace)),
            "table": fold(name) if name is not None else None}


def credential_event(
    ctx: RequestContext,
    caller: CallerIdentity | None,
    table: Scope,
    access: AccessMode | None,
    outcome: str,
    *,
    defer: bool = False,
) -> None:
    """Log one decision on `table` = (warehouse, namespace levels, table name or None), names
    folded (`folded_scope`); `access` None when the request was refused before its access was
    known (a project refusal).

    With `defer` (coalesced waiters), on a running loop the line is written just after the
    current step, i.e. after the caller's answer.
    """
    if not _log.isEnabledFor(logging.INFO):
        return
    extra = {
        "audit": "credential",
        "caller": caller.name if caller is not None else "anonymous",
        **folded_scope(table),
        "access": access.value if access is not None else None,
        "outcome": outcome,
        "surface": ctx.surface,
        "request_id": ctx.request_id,
    }
    if defer:
        try:
            asyncio.get_running_loop().call_soon(_emit, outcome, extra)
            return
        except RuntimeError:  # no running loop: write it now
            pass
    _emit(outcome, extra)


class TableNotes:
    """The tables a request that is not a credential request decided on, audited with its
    outcome once it is answered (`audit="table"` lines: creates, drops, commits, renames,
    loads, lists and forwarded catalog calls of every surface).

    Why a context variable: the gate's `authorize` is the one point every surface passes for
    every table a request names (a rename names two); it notes them here, and the surface that
    opened the notes writes one line per table with the answer's outcome, so no handler has
    to remember to audit. A credential request's grant has its `credential` line from the
    service (`successes=False`): only its refusals and failures get table lines, whichever
    layer raised them.
    """

    __slots__ = ("_token", "successes", "tables")

    def __init__(self, successes: bool = True) -> None:
        self.tables: list[tuple[RequestContext, CallerIdentity, Scope, AccessMode]] = []
        # Whether a success is written too (else `write` writes only failures, and a surface
        # that knows its request succeeded may just `close`).
        self.successes = successes
        self._token: Token[TableNotes | None] | None = _notes.set(self)

    def close(self) -> None:
        """Stop collecting (idempotent; the surface calls it however the request ended)."""
        if self._token is not None:
            _notes.reset(self._token)
            self._token = None

    def write(self, method: str, route: str, outcome: str, *, failed: bool) -> None:
        """One line per table noted, with the request's outcome (a status or a gRPC code)."""
        self.close()
        if (not self.tables or not (failed or self.successes)
                or not _log.isEnabledFor(logging.INFO)):
            return
        seen: set[tuple[Scope, AccessMode]] = set()
        for ctx, caller, scope, access in self.tables:
            if (scope, access) in seen:
                continue
            seen.add((scope, access))
            _log.info("table %s %s", method, outcome, extra={
                "audit": "table", "caller": caller.name, **folded_scope(scope),
                "access": access.value, "method": method, "route": route,
                "outcome": outcome, "surface": ctx.surface, "request_id": ctx.request_id,
            })


_notes: ContextVar[TableNotes | None] = ContextVar("lakegate_table_notes", default=None)


def note_table(ctx: RequestContext, caller: CallerIdentity, table: Scope,
               access: AccessMode) -> None:
    """Note a table the current request decided on (no-op outside `TableNotes`)."""
    notes = _notes.get()
    if notes is not None:
        notes.tables.append((ctx, caller, table, access))


def _emit(outcome: str, extra: dict[str, Any]) -> None:
    _log.info("credential %s", outcome, extra=extra)


def _iso(epoch_s: float) -> str:
    return datetime.fromtimestamp(epoch_s, UTC).isoformat(timespec="milliseconds")


class AuditTrail:
    """The service's audit of credential decisions: single lines, and folded read hits.

    Args:
        clock: `now()` stamps the first and last request of a folded line.
        interval_s: seconds between fold flushes; 0 writes one line per request.
        spawn: the App's registry (owner of the flush task), None when nothing is folded.
        max_keys: distinct fold keys that trigger an early flush.
    """

    def __init__(self, clock: Clock, interval_s: float = 0.0, spawn: Spawn | None = None,
                 *, max_keys: int = AUDIT_FOLD_MAX_KEYS) -> None:
        self._clock = clock
        self._interval_s = interval_s
        self._spawn = spawn
        self._max_keys = max_keys
        self.folding = interval_s > 0
        # key -> [count, first epoch s, last epoch s]
        self._fold: dict[FoldKey, list[Any]] = {}
        self._task: asyncio.Task[None] | None = None

    def credential(self, ctx: RequestContext, table: Scope, access: AccessMode,
                   outcome: str, *, defer: bool = False) -> None:
        """Audit one decision of the service for `ctx.caller` on `table`."""
        if not (self.folding and access is _READ and outcome in _FOLDED_OUTCOMES):
            credential_event(ctx, ctx.caller, table, access, outcome, defer=defer)
            return
        if not _log.isEnabledFor(logging.INFO):
            return
        caller = ctx.caller
        key = (caller.name if caller is not None else "anonymous", table[0], table[1], table[2],
               access, outcome, ctx.surface or "")
        now = self._clock.now()
        entry = self._fold.get(key)
        if entry is None:
            if len(self._fold) >= self._max_keys:
                self.flush()
            self._fold[key] = [1, now, now]
        else:
            entry[0] += 1
            entry[2] = now

    def flush(self) -> int:
        """Write one line per fold key and start a new fold; returns the requests written."""
        fold, self._fold = self._fold, {}
        # Keys hold names as sent (a hit costs one dict update); spellings of one table are
        # merged here, under their folded form.
        merged: dict[tuple[Any, ...], list[Any]] = {}
        for (caller, warehouse, namespace, name, access, outcome, surface), (
                count, first, last) in fold.items():
            names = folded_scope((warehouse, namespace, name))
            key = (caller, names["warehouse"], names["namespace"], names["table"], access,
                   outcome, surface)
            entry = merged.get(key)
            if entry is None:
                merged[key] = [count, first, last]
            else:
                entry[0] += count
                entry[1] = min(entry[1], first)
                entry[2] = max(entry[2], last)
        total = 0
        for (caller, warehouse, namespace, name, access, outcome, surface), (
                count, first, last) in merged.items():
            total += count
            _log.info("credential %s", outcome, extra={
                "audit": "credential", "caller": caller, "warehouse": warehouse,
                "namespace": namespace, "table": name, "access": access.value,
                "outcome": str(outcome), "surface": surface or None, "count": count,
                "first_ts": _iso(first), "last_ts": _iso(last), "request_id": None,
            })
        return total

    @property
    def pending(self) -> int:
        """Requests folded and not yet written."""
        return sum(entry[0] for entry in self._fold.values())

    def start(self) -> None:
        """Start the flush task (idempotent; nothing to start in per-request mode)."""
        if self.folding and self._task is None and self._spawn is not None:
            self._task = self._spawn(self._run())

    async def _run(self) -> None:
        while True:
            await self._clock.sleep(self._interval_s)
            self.flush()

    async def close(self) -> None:
        """Cancel the flush task and write what is folded (called after the listeners drain)."""
        task, self._task = self._task, None
        if task is not None and not task.done():
            task.cancel()
            await asyncio.wait({task})
        self.flush()
