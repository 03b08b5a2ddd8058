"""The emulator's object graph (built once per app) and the lookups every route shares."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING

from aiohttp import web

from devstack.emulator.auth import ANONYMOUS, JwtAuthenticator, Principal
from devstack.emulator.config import EmulatorConfig
from devstack.emulator.errors import (
    ApiError,
    PlainRejection,
    not_found_namespace,
    not_found_warehouse,
)
from devstack.emulator.faults import Faults
from devstack.emulator.idempotency import IdempotencyStore
from devstack.emulator.models import Namespace, Warehouse
from devstack.emulator.names import decode_namespace_segment, validate_namespace
from devstack.emulator.policy import Permission
from devstack.emulator.stats import Stats
from devstack.emulator.store import Store
from devstack.emulator.vending import CredentialVendor

if TYPE_CHECKING:
    from devstack.emulator.events import EventPublisher

NIL_PROJECT = "00000000-0000-0000-0000-000000000000"


@dataclass
class EmulatorState:
    config: EmulatorConfig
    store: Store
    stats: Stats
    faults: Faults
    vendor: CredentialVendor
    idempotency: IdempotencyStore
    authenticator: JwtAuthenticator | None
    events: EventPublisher | None = None  # Lakekeeper's change events (NATS), when configured


STATE: web.AppKey[EmulatorState] = web.AppKey("emulator_state", EmulatorState)
PRINCIPAL_KEY: web.RequestKey[Principal] = web.RequestKey("emulator_principal", Principal)
PERMISSION_KEY: web.RequestKey[Permission] = web.RequestKey("emulator_permission", Permission)
REPLAY_KEY: web.RequestKey[bool] = web.RequestKey("emulator_idempotent_replay", bool)


def state_of(request: web.Request) -> EmulatorState:
    return request.app[STATE]


def principal_of(request: web.Request) -> Principal:
    principal: Principal = request.get(PRINCIPAL_KEY, ANONYMOUS)
    return principal


def permission_of(request: web.Request) -> Permission:
    """Storage permission of the acting role (`x-assume-role`): read role -> READ, else RWD."""
    permission: Permission = request.get(PERMISSION_KEY, Permission.READ_WRITE_DELETE)
    return permission


def project_of(request: web.Request) -> str:
    raw = request.headers.get("x-project-id") or request.headers.get("x-project-ident")
    if not raw:
        return NIL_PROJECT
    try:
        return str(uuid.UUID(raw))
    except ValueError as exc:
        raise ApiError(400, "InvalidProjectId", "x-project-id must be a UUID") from exc


def warehouse_from_path(request: web.Request, key: str, message: str) -> Warehouse:
    """The active warehouse whose UUID is the path parameter `key`.

    Not a UUID: 400 `WarehouseIdIsNotUUID` with `message` (formatted with `raw`, the value).
    """
    raw = request.match_info[key]
    try:
        wid = str(uuid.UUID(raw))
    except ValueError as exc:
        raise ApiError(400, "WarehouseIdIsNotUUID", message.format(raw=raw)) from exc
    return warehouse_by_id(request, wid)


def warehouse_from_prefix(request: web.Request) -> Warehouse:
    """`{prefix}` must be a warehouse UUID (names are not accepted, as in Lakekeeper)."""
    return warehouse_from_path(
        request, "prefix", "Provided warehouse id is not a valid UUID: {raw}"
    )


def warehouse_by_id(request: web.Request, wid: str) -> Warehouse:
    wh = state_of(request).store.get_warehouse(wid)
    if wh is None or wh.status != "active":
        raise not_found_warehouse()
    return wh


def namespace_from_path(request: web.Request, wh: Warehouse) -> Namespace:
    parts = decode_namespace_segment(request.match_info["namespace"])
    validate_namespace(parts)
    ns = state_of(request).store.get_namespace(wh.id, parts)
    if ns is None:
        raise not_found_namespace()
    return ns


def namespace_from_body(request: web.Request, wh: Warehouse, parts: list[str]) -> Namespace:
    validate_namespace(parts)
    ns = state_of(request).store.get_namespace(wh.id, parts)
    if ns is None:
        raise not_found_namespace()
    return ns


TRUE_VALUES = frozenset({"1", "t", "T", "TRUE", "true", "True"})
FALSE_VALUES = frozenset({"0", "f", "F", "FALSE", "false", "False"})


def query_bool(request: web.Request, name: str, default: bool) -> bool:
    """Lakekeeper's `deserialize_bool` (`api/iceberg/types.rs` -> iceberg-ext `ParseFromStr`).

    Exactly `1 t T TRUE true True` / `0 f F FALSE false False`, untrimmed; anything else,
    the empty string included, is an axum query rejection (plain-text 400).
    """
    raw = request.query.get(name)
    if raw is None:
        return default
    if raw in TRUE_VALUES:
        return True
    if raw in FALSE_VALUES:
        return False
    raise PlainRejection(400, f"Failed to deserialize query string: {name}: invalid boolean")


def query_page_size(request: web.Request, name: str = "pageSize") -> str | None:
    """The raw page size, or the axum plain-text 400 for a non-integer value."""
    raw = request.query.get(name)
    if raw is None or raw == "":
        return None
    try:
        int(raw)
    except ValueError as exc:
        raise PlainRejection(
            400, f"Failed to deserialize query string: {name}: invalid digit found in string"
        ) from exc
    return raw
