"""`Idempotency-Key` handling (Lakekeeper `service/idempotency.rs`, `request_metadata.rs`,
lakekeeper-storage-postgres `idempotency.rs`).

The header is parsed on every request, GET included: the key must be a UUID (empty is
ignored); a duplicated header -> 400 DuplicateIdempotencyKey, a non-UUID -> 400
InvalidIdempotencyKey. Mutations record a successful result under (warehouse, key) together with
the operation; the same key for another operation -> 400 IdempotencyKeyReused. A replay of the
same operation answers from the record (a create re-loads the table, see routes_tables). A
second request while the first runs -> 409 RequestInProgress (emulator only: Lakekeeper has no
in-progress state).
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass

from aiohttp import web

from devstack.emulator.errors import ApiError

_MAX_KEYS = 100_000


@dataclass(frozen=True)
class Recorded:
    operation: str
    status: int
    body: bytes
    content_type: str | None
    expires_monotonic: float


def parse_key(request: web.Request) -> str | None:
    """The normalised key, None when absent or empty, or a 400 ApiError."""
    values = request.headers.getall("Idempotency-Key", [])
    if not values:
        return None
    if len(values) > 1:
        raise ApiError(400, "DuplicateIdempotencyKey", "Multiple Idempotency-Key headers")
    raw = values[0].strip()
    if raw == "":
        return None
    try:
        return str(uuid.UUID(raw))
    except ValueError as exc:
        raise ApiError(400, "InvalidIdempotencyKey", "Idempotency-Key must be a UUID") from exc


class IdempotencyStore:
    """Remembered results and in-progress keys, scoped by (warehouse, key)."""

    def __init__(self, lifetime_s: float) -> None:
        self._lifetime_s = lifetime_s
        self._done: dict[tuple[str, str], Recorded] = {}
        self._running: set[tuple[str, str]] = set()

    def begin(self, scope: tuple[str, str], operation: str) -> Recorded | None:
        """A recorded result to replay, or None after marking the key in progress."""
        rec = self._done.get(scope)
        if rec is not None:
            if time.monotonic() < rec.expires_monotonic:
                if rec.operation != operation:
                    raise ApiError(
                        400,
                        "IdempotencyKeyReused",
                        "Idempotency-Key was already used for a different operation. Keys must"
                        " be globally unique and must not be reused across operations.",
                    )
                return rec
            del self._done[scope]
        if scope in self._running:
            raise ApiError(
                409, "RequestInProgress", "A request with this Idempotency-Key is in progress"
            )
        self._running.add(scope)
        return None

    def finish(
        self, scope: tuple[str, str], operation: str, response: web.StreamResponse | None
    ) -> None:
        self._running.discard(scope)
        if isinstance(response, web.Response) and 200 <= response.status < 300:
            if len(self._done) >= _MAX_KEYS:
                self._done.clear()
            self._done[scope] = Recorded(
                operation=operation,
                status=response.status,
                body=bytes(response.body) if isinstance(response.body, (bytes, bytearray)) else b"",
                content_type=response.content_type if response.body else None,
                expires_monotonic=time.monotonic() + self._lifetime_s,
            )
