"""TokenSource: the gateway's ONE upstream session token (docs/contracts.md §3).

Kinds: none, static, file (re-read when it rotates, like a Kubernetes projected token) and
OAuth2 client credentials (gateway/upstream/client_credentials.py: background refresh at about
80% of the lifetime, single-flight, backoff while the IdP is down).
"""

from __future__ import annotations

import asyncio
import os
import random
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from gateway.clock import Clock
from gateway.clock_skew import ClockSkew
from gateway.concurrency import Spawn
from gateway.errors import IdentityProviderError
from gateway.metrics import Metrics
from gateway.secrets import Secret
from gateway.settings import TokenKind, TokenSettings
from gateway.upstream.client_credentials import (
    ClientCredentialsTokenSource,
    jwt_expiry_s,
    refresh_point_s,
)
from gateway.upstream.transport import Transport

__all__ = [
    "ClientCredentialsTokenSource", "NoToken", "StaticToken", "TokenFile", "TokenSource",
    "build_token_source", "jwt_expiry_s", "refresh_point_s",
]


class TokenSource(Protocol):
    """The session token, behind one small interface."""

    async def token(self) -> Secret | None:
        """The current token (fetching one if none is usable); None when no auth is used.

        Raises:
            IdentityProviderError: no usable token and none can be obtained now.
        """
        ...

    async def force_refresh(self, rejected: Secret | None) -> Secret | None:
        """After a 401 with `rejected`: a different token if one can be had."""
        ...

    def ready(self) -> bool:
        """A usable token is held (or none is needed)."""
        ...

    def start(self, spawn: Spawn) -> None:
        """Start background prefetch/refresh through the App's task registry."""
        ...

    async def close(self) -> None: ...


class StaticToken:
    """A fixed token from the settings (refresh cannot help: a 401 stays a 401)."""

    def __init__(self, token: Secret | None, metrics: Metrics | None = None) -> None:
        self._token = token
        exp = jwt_expiry_s(token.reveal()) if token is not None else None
        if metrics is not None and exp is not None:
            metrics.idp_token_expiry.set(exp)

    async def token(self) -> Secret | None:
        return self._token

    async def force_refresh(self, rejected: Secret | None) -> Secret | None:
        return self._token

    def ready(self) -> bool:
        return True

    def start(self, spawn: Spawn) -> None:
        return None

    async def close(self) -> None:
        return None


class NoToken(StaticToken):
    """The catalog runs without authentication: the fixed token is none."""

    def __init__(self) -> None:
        super().__init__(None)


@dataclass(frozen=True)
class _FileState:
    stamp: tuple[int, int, int]  # (inode, mtime_ns, size)
    token: Secret


class TokenFile:
    """A token read from a file, re-read when its inode/mtime/size changes.

    Kubernetes rotates projected tokens by swapping a symlink; `stat` follows it, so a new
    inode shows the rotation. File I/O runs in a thread: never block the loop.
    """

    def __init__(self, path: Path, clock: Clock, metrics: Metrics, *,
                 check_interval_s: float = 1.0) -> None:
        self._path = path
        self._clock = clock
        self._metrics = metrics
        self._check_interval_s = check_interval_s
        self._state: _FileState | None = None
        self._checked_mono: float | None = None

    def _read(self) -> _FileState:
        st = os.stat(self._path)
        text = self._path.read_text(encoding="utf-8").strip()
        return _FileState(stamp=(st.st_ino, st.st_mtime_ns, st.st_size), token=Secret(text))

    def _stat(self) -> tuple[int, int, int]:
        st = os.stat(self._path)
        return (st.st_ino, st.st_mtime_ns, st.st_size)

    async def _reload(self, force: bool) -> Secret:
        try:
            if not force and self._state is not None:
                stamp = await asyncio.to_thread(self._stat)
                if stamp == self._state.stamp:
                    return self._state.token
            state = await asyncio.to_thread(self._read)
        except OSError as exc:
            if self._state is not None:  # mid-rotation: keep the last good token
                return self._state.token
            raise IdentityProviderError("the token file cannot be read") from exc
        if not state.token:
            if self._state is not None:
                return self._state.token
            raise IdentityProviderError("the token file is empty")
        self._state = state
        exp = jwt_expiry_s(state.token.reveal())
        if exp is not None:
            self._metrics.idp_token_expiry.set(exp)
        return state.token

    async def token(self) -> Secret | None:
        now = self._clock.monotonic()
        if (
            self._state is not None
            and self._checked_mono is not None
            and now - self._checked_mono < self._check_interval_s
        ):
            return self._state.token
        self._checked_mono = now
        return await self._reload(force=False)

    async def force_refresh(self, rejected: Secret | None) -> Secret | None:
        self._checked_mono = self._clock.monotonic()
        return await self._reload(force=True)

    def ready(self) -> bool:
        return self._state is not None

    def start(self, spawn: Spawn) -> None:
        return None

    async def close(self) -> None:
        return None


def build_token_source(
    settings: TokenSettings, transport: Transport, clock: Clock, metrics: Metrics,
    *, rng: random.Random | None = None, skew: ClockSkew | None = None,
) -> TokenSource:
    """The token source the settings ask for (`skew`: told the IdP's `Date`)."""
    if settings.kind is TokenKind.NONE:
        return NoToken()
    if settings.kind is TokenKind.STATIC:
        assert settings.token is not None
        return StaticToken(Secret(settings.token.get_secret_value()), metrics)
    if settings.kind is TokenKind.FILE:
        assert settings.path is not None
        return TokenFile(settings.path, clock, metrics, check_interval_s=settings.file_check_s)
    return ClientCredentialsTokenSource(settings, transport, clock, metrics, rng=rng, skew=skew)
