"""FakeTables: a catalog whose tables can be replaced, seen through the credential fetch and
the identity load (the two upstream calls of gateway/cache/identity.py)."""

from __future__ import annotations

import asyncio
import uuid
from collections import deque

from gateway.cache.expiry import credential_set, storage_credential
from gateway.errors import GatewayError
from gateway.identity import TableIdentity
from gateway.models import CacheKey, CredentialSet, RequestContext
from gateway.upstream.table_identity import IdentityAnswer
from tests.fakes.clock import FakeClock


class FakeTables:
    """Table name → (id, location). `replace(name)` is a drop and re-create: a new id and a
    new location. `fetch` vends a credential for the current location (prefix = location);
    `load` answers the current identity (and 304 when `etags` is on and nothing changed)."""

    def __init__(self, clock: FakeClock, lifetime_s: float = 3600.0) -> None:
        self.clock = clock
        self.lifetime_s = lifetime_s
        self.tables: dict[str, TableIdentity] = {}
        self.fetches = 0
        self.loads = 0
        self.load_gate: asyncio.Event | None = None
        self.load_errors: deque[GatewayError] = deque()
        self.etags = False
        self.want_ids: list[bool] = []

    def create(self, name: str) -> TableIdentity:
        tid = str(uuid.uuid4())
        ident = TableIdentity(tid, f"s3://bucket/wh/{tid}")
        self.tables[name] = ident
        return ident

    def replace(self, name: str) -> TableIdentity:
        return self.create(name)

    async def fetch(self, key: CacheKey, ctx: RequestContext) -> CredentialSet:
        self.fetches += 1
        ident = self.tables[key.table]
        ms = int((self.clock.true_now() + self.lifetime_s) * 1000)
        config = {"s3.access-key-id": f"AK{self.fetches}", "s3.secret-access-key": "x",
                  "s3.session-token-expires-at-ms": str(ms)}
        return credential_set([storage_credential(ident.location, config)])

    async def load(self, key: CacheKey, ctx: RequestContext, *, etag: str | None = None,
                   want_id: bool = False) -> IdentityAnswer:
        self.loads += 1
        self.want_ids.append(want_id)
        if self.load_gate is not None:
            await self.load_gate.wait()
        if self.load_errors:
            raise self.load_errors.popleft()
        ident = self.tables[key.table]
        tag = f'W/"{ident.table_id}"' if self.etags else None
        if tag is not None and etag == tag:
            return IdentityAnswer(None, etag)
        return IdentityAnswer(ident, tag)
