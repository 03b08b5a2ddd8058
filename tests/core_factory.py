"""Gateway cores built and started per test, all stopped at the end (unit and stack tests)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from gateway.service.gateway_service import GatewayService
from gateway.service.wiring import Core


class CoreFactory:
    """`await factory(**settings)` → a started core's service; `close()` stops every core."""

    def __init__(self, build: Callable[..., Core]) -> None:
        self._build = build
        self._made: list[Core] = []

    async def __call__(self, **settings: Any) -> GatewayService:
        core = self._build(**settings)
        await core.start()
        self._made.append(core)
        return core.service

    async def close(self) -> None:
        for core in self._made:
            await core.close()
