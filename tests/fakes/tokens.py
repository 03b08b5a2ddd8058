"""FakeTokenSource: a scripted session token (rotations, IdP outage) for upstream tests."""

from __future__ import annotations

import asyncio

from gateway.errors import IdentityProviderError
from gateway.secrets import Secret


class FakeTokenSource:
    """Implements gateway.upstream.token_source.TokenSource in memory."""

    def __init__(self, tokens: list[str] | None = None) -> None:
        self._tokens = list(tokens or ["token-1", "token-2", "token-3"])
        self._index = 0
        self.token_calls = 0
        self.forced = 0
        self.down = False
        self.started = False
        self.closed = False
        self.gate: asyncio.Event | None = None  # set: token() waits for it (a slow IdP)

    @property
    def current(self) -> str:
        return self._tokens[self._index]

    async def token(self) -> Secret | None:
        self.token_calls += 1
        if self.gate is not None:
            await self.gate.wait()
        if self.down:
            raise IdentityProviderError("fake IdP is down")
        return Secret(self.current)

    async def force_refresh(self, rejected: Secret | None) -> Secret | None:
        self.forced += 1
        if self.down:
            raise IdentityProviderError("fake IdP is down")
        if rejected is not None and rejected.reveal() == self.current:
            self._index = min(self._index + 1, len(self._tokens) - 1)
        return Secret(self.current)

    def ready(self) -> bool:
        return not self.down

    def start(self, spawn: object) -> None:
        self.started = True

    async def close(self) -> None:
        self.closed = True
