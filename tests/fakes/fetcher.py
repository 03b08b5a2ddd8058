"""FakeFetcher: the cache's upstream as a scripted coroutine (lifetime, gate, errors)."""

from __future__ import annotations

import asyncio
from collections import deque

from gateway.cache.expiry import credential_set, storage_credential
from gateway.errors import GatewayError
from gateway.models import CacheKey, CredentialSet, RequestContext
from tests.fakes.clock import FakeClock
from tests.fakes.families import vended


class FakeFetcher:
    """Vends a fresh credential per call, expiring `lifetime_s` after the real (FakeClock
    true) time; with `send_date`, dated like a catalog's HTTP `Date` (whole seconds)."""

    def __init__(self, clock: FakeClock, lifetime_s: float | None = 3600.0) -> None:
        self.clock = clock
        self.lifetime_s = lifetime_s
        self.calls = 0
        self.keys: list[CacheKey] = []
        self.errors: deque[GatewayError] = deque()
        self.gate: asyncio.Event | None = None
        self.fail_always: GatewayError | None = None
        self.send_date = False
        self.date_offset_s = 0.0  # the catalog's clock minus real time (a wrong catalog clock)
        self.family = "s3"  # the storage family whose shape is vended (tests/fakes/families.py)

    async def __call__(self, key: CacheKey, ctx: RequestContext) -> CredentialSet:
        self.calls += 1
        self.keys.append(key)
        if self.gate is not None:
            await self.gate.wait()
        if self.fail_always is not None:
            raise self.fail_always.clone()
        if self.errors:
            raise self.errors.popleft()
        ms = (None if self.lifetime_s is None
              else int((self.clock.true_now() + self.lifetime_s) * 1000))
        prefix, config = vended(self.family, key.table, self.calls, ms)
        date = (float(int(self.clock.true_now() + self.date_offset_s)) if self.send_date
                else None)
        return credential_set([storage_credential(prefix, config)], server_date_s=date)
