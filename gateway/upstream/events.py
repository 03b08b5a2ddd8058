"""ChangeEventSubscription: the catalog's change events (Lakekeeper CloudEvents over NATS).

Lakekeeper publishes one CloudEvent per table change on one NATS subject, best effort: at most
once, no retry, dropped when its queue is full (docs/contracts.md "Table identity"). So this
is only a speed-up for the identity guard: an event names a table whose cached entries are
dropped at once, and the identity TTL bounds whatever an event that never came leaves behind.

The subscription never fails a request and never stops the gateway: a connect failure is
retried with backoff, a lost connection is reconnected by nats-py (which re-subscribes), and
the state goes to `on_state` (readiness detail, metric, the guard's TTL). Messages are parsed
here into `ChangeEvent`s; what they invalidate is decided in service/change_events.py.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from gateway.clock import Clock
from gateway.concurrency import Spawn
from gateway.events_settings import EventsSettings

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
CONNECT_BACKOFF_S = (0.5, 1.0, 2.0, 5.0)
TableName = tuple[tuple[str, ...], str]


@dataclass(frozen=True)
class ChangeEvent:
    """One parsed event: its type, warehouse, tabular id and every table name whose identity
    it may have changed (none for the types outside IDENTITY_EVENTS)."""

    type: str
    warehouse_id: str
    tabular_id: str
    names: tuple[TableName, ...]


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


def parse_event(payload: bytes) -> ChangeEvent | None:
    """A Lakekeeper CloudEvent (NATS structured JSON) → ChangeEvent; None if it is not one."""
    try:
        doc = json.loads(payload)
    except (ValueError, UnicodeDecodeError):
        return None
    if not isinstance(doc, dict) or doc.get("type") not in TABLE_EVENTS:
        return None
    wid, tid = doc.get("warehouse-id"), doc.get("tabular-id")
    name, namespace = doc.get("name"), doc.get("namespace")
    if not (isinstance(wid, str) and isinstance(tid, str) and isinstance(name, str)
            and isinstance(namespace, str)):
        return None
    if doc["type"] not in IDENTITY_EVENTS:
        return ChangeEvent(type=doc["type"], warehouse_id=wid.lower(), tabular_id=tid.lower(),
                           names=())
    names: list[TableName] = [(_levels(namespace), name)]
    data = doc.get("data")
    if isinstance(data, dict):  # renames: source and destination
        for field in ("source", "destination"):
            ident = _ident(data.get(field))
            if ident is not None and ident not in names:
                names.append(ident)
    return ChangeEvent(type=doc["type"], warehouse_id=wid.lower(), tabular_id=tid.lower(),
                       names=tuple(names))


class ChangeEventSubscription:
    """Owns one NATS connection and its subscription (started and closed by the Core).

    Args:
        settings: the `events` section (enabled).
        on_event: called with each parsed event (on the event loop).
        on_state: called with True when subscribed, False when the subscription is lost.
        on_malformed: called for a message that is not a Lakekeeper event.
        clock, spawn: as everywhere.
    """

    def __init__(self, settings: EventsSettings, on_event: Callable[[ChangeEvent], None],
                 on_state: Callable[[bool], None], on_malformed: Callable[[], None],
                 clock: Clock, spawn: Spawn) -> None:
        self._settings = settings
        self._on_event = on_event
        self._on_state = on_state
        self._on_malformed = on_malformed
        self._clock = clock
        self._spawn = spawn
        self._nc: Any = None
        self._task: asyncio.Task[Any] | None = None
        self.up = False

    def start(self) -> None:
        self._task = self._spawn(self._run())

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        await self._discard(timeout_s=5.0)

    def _set(self, up: bool) -> None:
        if up != self.up:
            self.up = up
            self._on_state(up)

    async def _run(self) -> None:
        failures = 0
        while self._nc is None:
            try:
                self._nc = await self._connect()
                await self._nc.subscribe(self._settings.nats_topic or "", cb=self._message)
                self._set(True)
                log.info("subscribed to the catalog's change events")
            except Exception as exc:  # noqa: BLE001 - never fatal: retried, readiness says so
                await self._discard()
                delay = CONNECT_BACKOFF_S[min(failures, len(CONNECT_BACKOFF_S) - 1)]
                failures += 1
                if failures == 1:
                    log.warning("cannot subscribe to the catalog's change events; retrying",
                                extra={"error_type": type(exc).__name__})
                await self._clock.sleep(delay)

    async def _discard(self, timeout_s: float = 2.0) -> None:
        """Close and forget the connection (a half-open one after a failed start, or at close)."""
        nc, self._nc = self._nc, None
        if nc is not None:
            try:
                async with asyncio.timeout(timeout_s):
                    await nc.close()
            except Exception:
                log.debug("NATS close failed", exc_info=True)

    async def _connect(self) -> Any:
        import nats

        s = self._settings

        async def disconnected() -> None:
            self._set(False)
            log.warning("lost the catalog's change events; identity TTL without events applies")

        async def reconnected() -> None:
            self._set(True)
            log.info("change events subscription restored")

        async def error(exc: Exception) -> None:
            log.debug("NATS error: %s", type(exc).__name__)

        options: dict[str, Any] = {
            "servers": [s.nats_address], "connect_timeout": 2, "allow_reconnect": True,
            "max_reconnect_attempts": -1, "reconnect_time_wait": 0.5,
            "disconnected_cb": disconnected, "reconnected_cb": reconnected, "error_cb": error,
            "closed_cb": disconnected,
        }
        if s.nats_user and s.nats_password is not None:
            options |= {"user": s.nats_user, "password": s.nats_password.get_secret_value()}
        if s.nats_token is not None:
            options["token"] = s.nats_token.get_secret_value()
        if s.nats_creds_file is not None:
            options["user_credentials"] = str(s.nats_creds_file)
        return await nats.connect(**options)

    async def _message(self, msg: Any) -> None:
        event = parse_event(msg.data)
        if event is None:
            self._on_malformed()
            return
        self._on_event(event)
