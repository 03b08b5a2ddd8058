"""Publish one change event for a request: the app's publisher (NATS, when configured), the
request's principal as the event's actor, and the emulator's event-delay fault.

Why apart from `events.py`: the publisher knows nothing of the emulator's state; this is the
one place a request's state meets it (so `state.py` and `events.py` import in one direction).
"""

from __future__ import annotations

import json
from typing import Any

from aiohttp import web

from devstack.emulator.state import PRINCIPAL_KEY, state_of


def actor_of(request: web.Request) -> str:
    """Lakekeeper's `actor` of an event: the principal, or anonymous."""
    principal = request.get(PRINCIPAL_KEY)
    if principal is None:
        return json.dumps({"type": "anonymous"})
    return json.dumps({"type": "principal", "principal": principal.user_id})


async def emit(request: web.Request, type_: str, **fields: Any) -> None:
    """Publish through the app's publisher, if the emulator was configured with NATS."""
    state = state_of(request)
    if state.events is not None:
        await state.events.emit(request, type_, actor=actor_of(request),
                                delay_s=state.faults.event_delay_s, **fields)
