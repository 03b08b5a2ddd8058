"""Lakekeeper's change events (CloudEvents 1.0, NATS structured JSON) from the emulator.

Shaped as Lakekeeper's `CloudEventsPublisher` builds them (`service/events/publisher.rs`): one
JSON object per message on one subject; `id` a UUIDv7; `source` `uri:iceberg-catalog-service:
<hostname>`; `datacontenttype` always `application/json`; the extensions `tabular-type`,
`tabular-id`, `warehouse-id`, `name`, `namespace` (levels joined by `.` or U+001F depending on the
type), `prefix` (the warehouse id, or "" for updateTable/renameTable/renameView/undropTabulars),
`num-events`, `sequence-number`, `trace-id` (the request's `x-request-id` if it is a UUID) and
`actor` (a JSON document encoded as a string).

Delivery as Lakekeeper's: after the state change, into a queue of 1,000 with a 50 ms put
timeout (dropped on timeout); one task publishes one event at a time and drops it on error (no
retry, no outbox). Core NATS publish, no JetStream. Connection loss is logged, never fatal to
a request: events are best-effort by design, and subscribers must keep their TTLs.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import socket
import uuid
from typing import Any

from aiohttp import web

from devstack.emulator.errors import uuid7

log = logging.getLogger(__name__)

QUEUE_SIZE = 1000
PUT_TIMEOUT_S = 0.05
DOT = "."
UNIT = "\x1f"


TRACE_KEY: web.RequestKey[str] = web.RequestKey("emulator_trace_id", str)


def _trace_id(request: web.Request) -> str:
    """The request's id: its `x-request-id` if a UUID, else one UUIDv7 for all its events."""
    rid = request.headers.get("x-request-id", "")
    try:
        return str(uuid.UUID(rid))
    except ValueError:
        if TRACE_KEY not in request:
            request[TRACE_KEY] = str(uuid7())
        return request[TRACE_KEY]


class EventPublisher:
    """Publishes Lakekeeper-shaped CloudEvents to `subject` on the NATS server at `url`."""

    def __init__(self, url: str, subject: str) -> None:
        self._url = url
        self._subject = subject
        host = socket.gethostname() or "hostname-unavailable"
        self._source = f"uri:iceberg-catalog-service:{host}"
        self._queue: asyncio.Queue[tuple[bytes, float]] = asyncio.Queue(QUEUE_SIZE)
        self._nc: Any = None
        self._task: asyncio.Task[None] | None = None
        self.published = 0
        self.dropped = 0

    async def start(self) -> None:
        import nats

        # Lakekeeper aborts its start-up when NATS cannot be reached; so does the emulator.
        self._nc = await nats.connect(self._url, max_reconnect_attempts=-1,
                                      reconnect_time_wait=0.5, connect_timeout=5)
        self._task = asyncio.create_task(self._drain())

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        if self._nc is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._nc.close(), 5)

    async def emit(self, request: web.Request, type_: str, *, tabular_type: str,
                   tabular_id: str, warehouse_id: str, name: str, namespace: list[str],
                   join: str, prefix: str | None, actor: str, delay_s: float = 0.0,
                   data: Any = None, num_events: int = 1, sequence_number: int = 0) -> None:
        """Queue one event (after the state change is durable); dropped after 50 ms if full.

        `prefix` None means the warehouse id; "" is Lakekeeper's empty prefix quirk; `actor`:
        the caller, as Lakekeeper spells it; `delay_s`: a test fault (`publish.emit`)."""
        event = {
            "specversion": "1.0", "id": str(uuid7()), "type": type_, "source": self._source,
            "datacontenttype": "application/json", "data": data,
            "tabular-type": tabular_type, "tabular-id": tabular_id,
            "warehouse-id": warehouse_id, "name": name, "namespace": join.join(namespace),
            "prefix": warehouse_id if prefix is None else prefix,
            "num-events": num_events, "sequence-number": sequence_number,
            "trace-id": _trace_id(request), "actor": actor,
        }
        try:
            await asyncio.wait_for(self._queue.put((json.dumps(event).encode(), delay_s)),
                                   PUT_TIMEOUT_S)
        except TimeoutError:
            self.dropped += 1
            log.warning("change event dropped: the publish queue is full")

    async def _drain(self) -> None:
        while True:
            payload, delay_s = await self._queue.get()
            if delay_s:
                await asyncio.sleep(delay_s)
            try:
                await self._nc.publish(self._subject, payload)
                self.published += 1
            except Exception as exc:  # noqa: BLE001 - best effort, as Lakekeeper: log and drop
                self.dropped += 1
                log.warning("change event dropped: %s", type(exc).__name__)

