"""Cross-cutting request handling, outermost first:

1. `envelope_middleware`: `x-request-id` (echoed or a new UUIDv7), `Cache-Control: private` and
   `Vary` on Lakekeeper paths (401s included), the body-size limit, and rendering of
   ApiError (envelope), PlainRejection (axum plain text) and unexpected errors (500 envelope,
   no internals).
2. `gate_middleware`: per-operation counters, fault injection, authentication, `x-assume-role`,
   `Idempotency-Key` validation on every request and replay for mutations.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Awaitable, Callable

from aiohttp import web

from devstack.emulator.errors import ApiError, PlainRejection, envelope, uuid7
from devstack.emulator.idempotency import parse_key
from devstack.emulator.policy import Permission
from devstack.emulator.state import PERMISSION_KEY, PRINCIPAL_KEY, REPLAY_KEY, state_of

log = logging.getLogger(__name__)
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
LAKEKEEPER_PREFIXES = ("/catalog/", "/management/", "/lakekeeper/")
VARY = "authorization, x-project-id, x-iceberg-access-delegation"
MUTATING = frozenset({"POST", "DELETE", "PUT"})
# Lakekeeper answers a replayed create by loading the table (client-managed), not from a record.
REPLAY_BY_LOADING = "create_generic_table"


def _lakekeeper_path(path: str) -> bool:
    return path.startswith(LAKEKEEPER_PREFIXES)


def _error_response(exc: ApiError) -> web.Response:
    resp = web.json_response(
        envelope(exc.status, exc.error_type, exc.message, exc.detail), status=exc.status
    )
    resp.headers.update(exc.headers)
    return resp


@web.middleware
async def envelope_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    request_id = request.headers.get("x-request-id") or str(uuid7())
    resp: web.StreamResponse
    try:
        length = request.content_length
        if length is not None and length > state_of(request).config.max_body_bytes:
            raise PlainRejection(413, "Failed to buffer the request body: length limit exceeded")
        resp = await handler(request)
    except ApiError as exc:
        resp = _error_response(exc)
    except PlainRejection as exc:
        resp = web.Response(status=exc.status, text=exc.text, content_type="text/plain")
    except web.HTTPException as exc:
        if exc.status == 413:
            resp = web.Response(
                status=413,
                text="Failed to buffer the request body: length limit exceeded",
                content_type="text/plain",
            )
        else:
            resp = web.Response(status=exc.status, headers=exc.headers, text=exc.text)
    except asyncio.CancelledError:
        raise
    except Exception:  # the surface boundary: render 500 with an id, no internals
        log.exception("unexpected error on %s %s", request.method, request.path)
        resp = _error_response(ApiError(500, "InternalServerError", "Internal server error"))
    if not resp.prepared:
        resp.headers["x-request-id"] = request_id
        if _lakekeeper_path(request.path):
            resp.headers.setdefault("Cache-Control", "private")
            resp.headers["Vary"] = VARY
    return resp


def _permission(request: web.Request) -> Permission:
    """Lakekeeper's `x-assume-role`: read role -> READ; write role or none -> RWD."""
    raw = request.headers.get("x-assume-role")
    if raw is None or raw.strip() == "":
        return Permission.READ_WRITE_DELETE
    cfg = state_of(request).config
    try:
        role = str(uuid.UUID(raw.strip()))
    except ValueError as exc:
        raise ApiError(400, "InvalidRoleIdError", "x-assume-role must be a role UUID") from exc
    if cfg.read_role_id and role == cfg.read_role_id:
        return Permission.READ
    if cfg.write_role_id and role == cfg.write_role_id:
        return Permission.READ_WRITE_DELETE
    raise ApiError(400, "InvalidRoleIdError", "Unknown role id in x-assume-role")


@web.middleware
async def gate_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    route = request.match_info.route
    op = route.name if route is not None else None
    if op is None or op.startswith("_emulator"):
        return await handler(request)
    st = state_of(request)
    st.stats.incr(op)
    if op != "health" or (st.faults.current().get("operations") or []):
        decision = st.faults.decide(op)
        if decision.latency_s > 0:
            await asyncio.sleep(decision.latency_s)
        if decision.fails:
            st.stats.incr("faults_injected")
            if decision.drop and request.transport is not None:
                request.transport.abort()
                raise asyncio.CancelledError
            headers = {}
            if decision.retry_after is not None:
                headers["Retry-After"] = str(decision.retry_after)
            raise ApiError(
                decision.status or 503, "InjectedFault", "Injected fault", headers=headers
            )
    if op == "health":
        return await handler(request)
    if st.authenticator is not None and _lakekeeper_path(request.path):
        try:
            request[PRINCIPAL_KEY] = await st.authenticator.authenticate(
                request.headers.get("Authorization")
            )
        except ApiError:
            st.stats.incr("auth_failures")
            raise
    request[PERMISSION_KEY] = _permission(request)
    key = parse_key(request)  # validated on every request, GET included (request_metadata.rs)
    if key is None or request.method not in MUTATING:
        return await handler(request)
    scope = (request.match_info.get("prefix", ""), key)
    recorded = st.idempotency.begin(scope, op)
    if recorded is not None:
        if op == REPLAY_BY_LOADING:
            request[REPLAY_KEY] = True
            return await handler(request)
        if not recorded.body:
            return web.Response(status=recorded.status)
        return web.Response(
            status=recorded.status, body=recorded.body, content_type=recorded.content_type
        )
    resp: web.StreamResponse | None = None
    try:
        resp = await handler(request)
        return resp
    finally:
        st.idempotency.finish(scope, op, resp)
