"""ChangeEventSubscription: the catalog's change events (Lakekeeper CloudEvents over NATS).

Lakekeeper publishes one CloudEvent per table change on one NATS subject, best effort: at most
once, no retry, dropped when its queue is full (docs/contracts.md "Table identity"). So this
is only a speed-up for the identity guard: an event names a table whose cached entries are
dropped at once, and the identity TTL bounds whatever an event that never came leaves behind.

The subscription never fails a request and never stops the gateway: a connect failure is
retried with backoff, a lost connection is reconnected by nats-py (which re-subscribes), and
the state goes to the sink (readiness detail, metric, the guard's TTL). Messages are parsed
here into `ChangeEvent`s within bounds (size, namespace depth, name length: an event costs
O(its tables)); what they invalidate is decided in service/change_events.py.
"""

from __future__ import annotations

import asyncio
import json
import logging
import ssl
from dataclasses import dataclass
from typing import Any, Protocol

from gateway.clock import Clock
from gateway.concurrency import Spawn, TokenBucket
from gateway.events_settings import EventsSettings
from gateway.names import MAX_NAME_LEN, MAX_NAMESPACE_DEPTH

log = logging.getLogger(__name__)

# Lakekeeper's event types; anything else is not one of its events.
TABLE_EVENTS = frozenset({
    "createTable", "registerTable", "updateTable", "dropTable", "renameTable",
    "createView", "updateView", "dropView", "renameView",
    "createGenericTable", "dropGenericTable", "renameGenericTable", "undropTabulars",
})
# The ones that can change which table (id, location) a name stands for. Not updateTable: an
# Iceberg table's location is immutable in Lakekeeper (a different set-location is refused),
# so a commit never moves it, and dropping every node's credentials on every commit would cost
# an STS call per node per commit. Not views: no credentials are cached for them.
IDENTITY_EVENTS = frozenset({
    "createTable", "registerTable", "dropTable", "renameTable",
    "createGenericTable", "dropGenericTable", "renameGenericTable", "undropTabulars",
})
FLOOD_PAUSE_S = 5.0  # a subscription that outran its event budget stays closed this long
CONNECT_BACKOFF_S = (0.5, 1.0, 2.0, 5.0)
TableName = tuple[tuple[str, ...], str]


# An id is a UUID (36 characters); a little room, never a megabyte of "id".
MAX_ID_LEN = 64
# What may wait in the client for the consumer, in bytes (with `max_pending_events` messages).
MAX_PENDING_BYTES = 64 << 20


@dataclass(frozen=True)
class ChangeEvent:
    """One parsed event: its type, warehouse, tabular id and every table name whose identity
    it may have changed (none for the types outside IDENTITY_EVENTS)."""

    type: str
    warehouse_id: str
    tabular_id: str
    names: tuple[TableName, ...]
    # The request id of the catalog call that made it ("" when absent or not a short string):
    # a gateway recognises the event of its own create by it (service/own_creates.py).
    trace_id: str = ""


class BadEvent(Exception):
    """A message that is not applied: `result` is the metric's (`malformed`: not a Lakekeeper
    event; `refused`: over a limit); `lossy`: it may have named a table, so it counts as a lost
    event (the short identity TTL applies until resynchronised)."""

    def __init__(self, result: str, why: str, *, lossy: bool) -> None:
        super().__init__(why)
        self.result = result
        self.lossy = lossy


class EventSink(Protocol):
    """Where the subscription delivers (service/change_events.ChangeEvents)."""

    def apply(self, event: ChangeEvent) -> None: ...

    def rejected(self, result: str, *, lossy: bool) -> None: ...

    def state(self, up: bool) -> None: ...


def _levels(namespace: str) -> tuple[str, ...]:
    # `.` or U+001F depending on the type; levels never contain `.` (Lakekeeper validates).
    return tuple(p for p in namespace.replace("\x1f", ".").split(".") if p)


def _ident(value: Any) -> TableName | None:
    if not isinstance(value, dict):
        return None
    ns, name = value.get("namespace"), value.get("name")
    if (not isinstance(ns, list) or not all(isinstance(p, str) for p in ns)
            or not isinstance(name, str)):
        return None
    return tuple(ns), name


def _check_name(name: TableName) -> None:
    """Names as the gateway's requests may spell them (gateway.names): longer or deeper ones
    are refused whole, before anything costs in proportion to their size."""
    ns, table = name
    if not 1 <= len(ns) <= MAX_NAMESPACE_DEPTH:
        raise BadEvent("refused", f"namespace depth {len(ns)}", lossy=True)
    if len(table) > MAX_NAME_LEN or any(len(level) > MAX_NAME_LEN for level in ns):
        raise BadEvent("refused", "name too long", lossy=True)


def parse_event(payload: bytes, *, max_bytes: int) -> ChangeEvent:
    """A Lakekeeper CloudEvent (NATS structured JSON) → ChangeEvent.

    Raises:
        BadEvent: not one of Lakekeeper's events, or over a limit (size before parsing, then
            namespace depth, name and id lengths).
    """
    if len(payload) > max_bytes:
        raise BadEvent("refused", f"{len(payload)} bytes", lossy=True)
    try:
        doc = json.loads(payload)
    except (ValueError, UnicodeDecodeError):
        raise BadEvent("malformed", "not JSON", lossy=False) from None
    if not isinstance(doc, dict) or doc.get("type") not in TABLE_EVENTS:
        raise BadEvent("malformed", "not a table event", lossy=False)
    type_, identity = doc["type"], doc["type"] in IDENTITY_EVENTS
    wid, tid = doc.get("warehouse-id"), doc.get("tabular-id")
    name, namespace = doc.get("name"), doc.get("namespace")
    if not (isinstance(wid, str) and isinstance(tid, str) and isinstance(name, str)
            and isinstance(namespace, str)):
        raise BadEvent("malformed", "fields missing", lossy=identity)
    if len(wid) > MAX_ID_LEN or len(tid) > MAX_ID_LEN:
        raise BadEvent("refused", "id too long", lossy=identity)
    if not identity:
        return ChangeEvent(type=type_, warehouse_id=wid.lower(), tabular_id=tid.lower(),
                           names=())
    names: list[TableName] = [(_levels(namespace), name)]
    data = doc.get("data")
    if isinstance(data, dict):  # renames: source and destination
        for field in ("source", "destination"):
            ident = _ident(data.get(field))
            if ident is not None and ident not in names:
                names.append(ident)
    for each in names:
        _check_name(each)
    trace = doc.get("trace-id")
    trace_id = trace.lower() if isinstance(trace, str) and len(trace) <= MAX_ID_LEN else ""
    return ChangeEvent(type=type_, warehouse_id=wid.lower(), tabular_id=tid.lower(),
                       names=tuple(names), trace_id=trace_id)


def tls_context(settings: EventsSettings) -> ssl.SSLContext | None:
    """The TLS context asked for (CA file, client certificate), or None (nats-py's default,
    the system store, when a server requires TLS). Reads files: call off the event loop."""
    if not settings.tls:
        return None
    ca = str(settings.nats_tls_ca_file) if settings.nats_tls_ca_file else None
    context = ssl.create_default_context(cafile=ca)
    if settings.nats_tls_cert_file is not None and settings.nats_tls_key_file is not None:
        context.load_cert_chain(str(settings.nats_tls_cert_file), str(settings.nats_tls_key_file))
    return context


class ChangeEventSubscription:
    """Owns one NATS connection and its subscription (started and closed by the Core).

    A supervisor task connects, subscribes and confirms the subscription with a flush (a
    permission violation arrives before the flush's answer); it starts over with backoff when
    the connection is closed for good or the server refuses the subscription. nats-py itself
    reconnects a lost connection (noticed within (max_outstanding_pings + 1) pings when
    half-open) and re-subscribes. Messages the client drops because the consumer fell behind
    count as lost events.

    Args:
        settings: the `events` section (enabled).
        sink: receives each parsed event, each refused or dropped one, and the state.
        clock, spawn: as everywhere.
    """

    def __init__(self, settings: EventsSettings, sink: EventSink, clock: Clock,
                 spawn: Spawn) -> None:
        self._settings = settings
        self._sink = sink
        self._clock = clock
        self._spawn = spawn
        self._nc: Any = None
        self._task: asyncio.Task[Any] | None = None
        self._closing = False
        self.up = False
        self._budget = TokenBucket(settings.events_per_s, clock, burst=settings.event_burst)
        self._broken: asyncio.Event | None = None  # the current subscription's
        self._flooded = False

    def start(self) -> None:
        if self._settings.secret_in_clear:
            log.warning("NATS credentials cross a plaintext nats:// connection; use tls:// (or "
                        "an nkey seed or creds file, whose secret never leaves)")
        self._task = self._spawn(self._run())

    async def close(self) -> None:
        self._closing = True
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        await self._discard(timeout_s=5.0)

    def _set(self, up: bool) -> None:
        if up != self.up:
            self.up = up
            self._sink.state(up)

    async def _run(self) -> None:
        failures = 0
        while True:
            broken = self._broken = asyncio.Event()
            try:
                await self._subscribe(broken)
                failures = 0
                self._set(True)
                log.info("subscribed to the catalog's change events")
                await broken.wait()  # closed for good, or the subscription refused
                self._set(False)
            except Exception as exc:  # noqa: BLE001 - never fatal: retried, readiness says so
                self._set(False)
                failures += 1
                if failures == 1:
                    log.warning("cannot subscribe to the catalog's change events; retrying",
                                extra={"error_type": type(exc).__name__})
            await self._discard()
            delay = CONNECT_BACKOFF_S[min(failures, len(CONNECT_BACKOFF_S) - 1)]
            if self._flooded:  # no messages at all while paused: a flood costs nothing then
                delay = max(delay, FLOOD_PAUSE_S)
            await self._clock.sleep(delay)
            self._flooded = False

    async def _subscribe(self, broken: asyncio.Event) -> None:
        s = self._settings
        self._nc = await self._connect(broken)
        await self._nc.subscribe(s.nats_topic or "", cb=self._message,
                                 pending_msgs_limit=s.max_pending_events,
                                 pending_bytes_limit=MAX_PENDING_BYTES)
        # Two round trips: a server's permissions violation for the SUB has been seen to arrive
        # after the first PONG, and an answer to the second comes after anything about the SUB.
        for _ in range(2):
            await self._nc.flush(timeout=s.flush_timeout_s)
            if broken.is_set():
                raise PermissionError("the NATS server refused the subscription")

    async def _discard(self, timeout_s: float = 2.0) -> None:
        """Close and forget the connection (a half-open one after a failed start, or at close)."""
        nc, self._nc = self._nc, None
        if nc is not None:
            try:
                async with asyncio.timeout(timeout_s):
                    await nc.close()
            except Exception:
                log.debug("NATS close failed", exc_info=True)

    async def _connect(self, broken: asyncio.Event) -> Any:
        import nats
        from nats import errors

        s = self._settings

        async def disconnected() -> None:
            if self.up and not self._closing:
                log.warning("lost the catalog's change events; identity TTL without events "
                            "applies")
            self._set(False)

        async def closed() -> None:
            self._set(False)
            broken.set()  # nats-py gave up on it (or it was closed): the supervisor reconnects

        async def reconnected() -> None:
            if not broken.is_set():
                self._set(True)
                log.info("change events subscription restored")

        async def error(exc: Exception) -> None:
            if isinstance(exc, errors.SlowConsumerError):
                self._sink.rejected("dropped", lossy=True)  # the consumer fell behind
            elif "permissions violation" in str(exc).lower():
                if not broken.is_set():
                    log.warning("the NATS server refused the change events subscription "
                                "(permissions); staleness bounded by cache.identity_ttl_s")
                self._set(False)
                broken.set()
            else:
                log.debug("NATS error: %s", type(exc).__name__)

        options: dict[str, Any] = {
            "servers": [s.nats_address], "connect_timeout": 2, "allow_reconnect": True,
            "max_reconnect_attempts": -1, "reconnect_time_wait": 0.5,
            "ping_interval": s.ping_interval_s, "max_outstanding_pings": s.max_outstanding_pings,
            "flush_timeout": s.flush_timeout_s,
            "disconnected_cb": disconnected, "reconnected_cb": reconnected, "error_cb": error,
            "closed_cb": closed,
        }
        context = await asyncio.to_thread(tls_context, s)
        if context is not None:
            options["tls"] = context
        if s.nats_user and s.nats_password is not None:
            options |= {"user": s.nats_user, "password": s.nats_password.get_secret_value()}
        if s.nats_token is not None:
            options["token"] = s.nats_token.get_secret_value()
        if s.nats_creds_file is not None:
            options["user_credentials"] = str(s.nats_creds_file)
        if s.nats_nkey_seed_file is not None:
            options["nkeys_seed"] = str(s.nats_nkey_seed_file)
        return await nats.connect(**options)

    async def _message(self, msg: Any) -> None:
        if not self._budget.try_acquire():  # a flood: dropped unread, like a client drop
            self._sink.rejected("rate_limited", lossy=True)
            if not self._flooded and self._broken is not None:
                # The NATS client still reads and parses every message on the loop before it
                # could be dropped: past the budget, the subscription pauses instead.
                self._flooded = True
                log.warning("change events arrive faster than EVENTS__EVENTS_PER_S; the "
                            "subscription pauses for %.0f s (identity TTL without events "
                            "applies)", FLOOD_PAUSE_S)
                self._broken.set()
            await asyncio.sleep(0)
            return
        try:
            event = parse_event(msg.data, max_bytes=self._settings.max_event_bytes)
        except BadEvent as bad:
            self._sink.rejected(bad.result, lossy=bad.lossy)
        else:
            self._sink.apply(event)
        # nats-py calls back for every waiting message without yielding: one event at a time,
        # the loop runs between two (a flood never holds it longer than one event).
        await asyncio.sleep(0)
