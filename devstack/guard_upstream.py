"""The upstream session a stack guard (ADLS, GCS) forwards through, tied to its app's life.

Both guards forward raw bytes (`auto_decompress=False`: a body is passed on as the store sent
it) with one generous total timeout, so one definition serves both.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Protocol

import aiohttp
from aiohttp import web


class HoldsSession(Protocol):
    """A guard's state: the session it forwards with, set while the app runs."""

    session: aiohttp.ClientSession | None


def forward_through_session(app: web.Application, state: HoldsSession) -> None:
    """Open `state.session` when `app` starts and close it when the app is cleaned up."""

    async def session_ctx(_app: web.Application) -> AsyncIterator[None]:
        state.session = aiohttp.ClientSession(
            timeout=aiohttp.ClientTimeout(total=120), auto_decompress=False
        )
        try:
            yield
        finally:
            await state.session.close()

    app.cleanup_ctx.append(session_ctx)
