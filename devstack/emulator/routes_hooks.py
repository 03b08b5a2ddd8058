"""Test hooks under `/_emulator/` (never Lakekeeper paths) and `/health`."""

from __future__ import annotations

import json

from aiohttp import web
from pydantic import ValidationError

from devstack.emulator.faults import FaultSpec
from devstack.emulator.state import state_of


async def health(request: web.Request) -> web.Response:
    return web.json_response({"status": "ok", "health": []})


async def get_stats(request: web.Request) -> web.Response:
    return web.json_response(state_of(request).stats.snapshot())


async def reset_stats(request: web.Request) -> web.Response:
    st = state_of(request)
    st.stats.reset()
    return web.json_response(st.stats.snapshot())


async def get_faults(request: web.Request) -> web.Response:
    return web.json_response(state_of(request).faults.current())


async def set_faults(request: web.Request) -> web.Response:
    st = state_of(request)
    raw = await request.read()
    try:
        spec = FaultSpec.model_validate(json.loads(raw or b"{}"))
    except (ValueError, ValidationError) as exc:
        return web.json_response({"error": str(exc)}, status=400)
    st.faults.set(spec)
    return web.json_response(st.faults.current())


async def clear_stc(request: web.Request) -> web.Response:
    """Forget Lakekeeper's server-side credential cache (the next vend calls STS)."""
    state_of(request).vendor.clear()
    return web.json_response({"cleared": True})


def add_routes(app: web.Application) -> None:
    app.router.add_get("/health", health, name="health")
    app.router.add_get("/_emulator/stats", get_stats, name="_emulator", allow_head=False)
    app.router.add_post("/_emulator/stats/reset", reset_stats, name="_emulator_reset")
    app.router.add_get("/_emulator/faults", get_faults, name="_emulator_faults", allow_head=False)
    app.router.add_post("/_emulator/faults", set_faults, name="_emulator_set_faults")
    app.router.add_post("/_emulator/stc/clear", clear_stc, name="_emulator_stc_clear")
