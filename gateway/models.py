"""Frozen domain models: what the service, the cache and the surfaces speak.

Wire shapes (Lakekeeper JSON, protobuf) are converted to these at the edges only
(`upstream/lakekeeper.py`, the surfaces), so no layer passes a raw dict to another.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from types import MappingProxyType
from typing import Any, Literal, NamedTuple

from gateway.errors import InvalidRequestError
from gateway.names import NAMESPACE_SEPARATOR as NAMESPACE_SEPARATOR
from gateway.names import check_name, check_namespace, check_warehouse, fold_namespace, fold_table
from gateway.names import join_namespace as join_namespace
from gateway.names import split_namespace as split_namespace

# Keys that carry a credential's expiry (epoch ms); Lakekeeper's `config` omits them.
EXPIRY_KEYS: tuple[str, ...] = (
    "s3.session-token-expires-at-ms",
    "expiration-time",
    "gcs.oauth2.token-expires-at",
)
EXPIRY_KEY_PREFIXES: tuple[str, ...] = ("adls.sas-token-expires-at-ms.",)

# Config keys whose values are secrets (used by reprs and log redaction).
SECRET_CONFIG_MARKERS: tuple[str, ...] = (
    "secret",
    "session-token",
    "token",
    "sas",
    "password",
    "key-id",
    "access-key",
)


def _frozen_map(value: Mapping[str, Any] | None) -> Mapping[str, Any]:
    return MappingProxyType(dict(value or {}))


def is_secret_config_key(key: str) -> bool:
    """Whether a credential config key holds a secret value (never logged or shown)."""
    lowered = key.lower()
    if lowered.endswith("expires-at-ms") or "expires-at" in lowered or lowered == "expiration-time":
        return False
    return any(marker in lowered for marker in SECRET_CONFIG_MARKERS)


def redacted_config(config: Mapping[str, str]) -> dict[str, str]:
    """A copy of a credential config safe for logs and reprs."""
    return {k: ("***" if is_secret_config_key(k) else v) for k, v in config.items()}


TableKind = Literal["generic", "iceberg"]


def table_kind(value: str | None) -> TableKind:
    """A table kind as callers spell it (`?kind=` / the gRPC `kind` field): absent, empty or
    "generic" is a generic table, "iceberg" an Iceberg table.

    Raises:
        InvalidRequestError: any other value (400).
    """
    if value is None or value in ("", "generic"):
        return "generic"
    if value == "iceberg":
        return "iceberg"
    raise InvalidRequestError("kind must be 'generic' or 'iceberg'")


class AccessMode(StrEnum):
    """The permission a caller asks for; read credentials are never upgraded to write."""

    READ = "read"
    WRITE = "write"


class Outcome(StrEnum):
    """How a credential request was answered by the cache (a metric label)."""

    HIT = "hit"
    MISS = "miss"
    COALESCED = "coalesced"
    STALE = "stale"


# What a policy or audit decision is about: (warehouse, namespace levels, table name), the
# table None for a decision on a whole namespace (list, create).
Scope = tuple[str, tuple[str, ...], str | None]


@dataclass(frozen=True)
class TableRef:
    """A table as the caller named it: warehouse name or UUID, namespace parts, table name.

    Validated on construction by the one set of name rules (gateway/names.py), whichever surface
    built it, so the service and the layers below trust every TableRef they are given.

    Raises:
        InvalidRequestError: a part breaks the name rules.
    """

    warehouse: str
    namespace: tuple[str, ...]
    name: str
    # "generic" (Lakekeeper's generic-table API) or "iceberg" (the Iceberg REST tables): the
    # catalog serves their credentials on different paths, so it is part of the cache key.
    kind: TableKind = "generic"
    # Computed once: refs are kept (route memos) and hashed and scoped on every request.
    _hash: int = field(init=False, repr=False, compare=False)
    _scope: Scope = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        check_warehouse(self.warehouse)
        object.__setattr__(self, "namespace", check_namespace(self.namespace))
        check_name(self.name, "table")
        object.__setattr__(self, "_scope", (self.warehouse, self.namespace, self.name))
        object.__setattr__(self, "_hash", hash((*self._scope, self.kind)))

    def __hash__(self) -> int:
        return self._hash

    def __eq__(self, other: object) -> bool:
        """Field equality (as generated), by identity or the stored hash first: the credential
        key memo is looked up with each surface's own TableRef of a table (two routes, two
        objects), once per cached answer."""
        if self is other:
            return True
        if other.__class__ is not TableRef:
            return NotImplemented
        o: TableRef = other
        return (self._hash == o._hash and self.name == o.name and self.namespace == o.namespace
                and self.warehouse == o.warehouse and self.kind == o.kind)

    @property
    def scope(self) -> Scope:
        return self._scope


@dataclass(frozen=True)
class Warehouse:
    """A resolved warehouse: its UUID (Lakekeeper's `{prefix}`) and its name."""

    id: str
    name: str


@dataclass(frozen=True)
class CallerIdentity:
    """Who is asking (from the caller auth of the surface)."""

    name: str
    authenticated: bool


@dataclass(frozen=True, repr=False)
class StorageCredential:
    """One vended credential for a storage prefix; `config` holds secrets (redacted repr)."""

    prefix: str
    config: Mapping[str, str]
    expires_at_ms: int | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "config", _frozen_map(self.config))

    def __repr__(self) -> str:
        return (
            f"StorageCredential(prefix={self.prefix!r}, config={redacted_config(self.config)!r}, "
            f"expires_at_ms={self.expires_at_ms!r})"
        )


@dataclass(frozen=True, repr=False)
class CredentialSet:
    """The credentials vended for one table; `expires_at_ms` is the earliest expiry of all.

    `server_date_s` is the catalog's own clock when it answered (its HTTP `Date`, epoch s), so
    the cache can measure the lifetime on the issuer's clock rather than on a local wall clock
    that may have been stepped. `expires_at_ms` stays the catalog's value on every wire.
    """

    credentials: tuple[StorageCredential, ...]
    expires_at_ms: int | None
    location: str = ""
    server_date_s: float | None = None
    # The catalog's table id, attached by an identity check whose load reported this very
    # `location` (the credentials call itself carries no id); None until one has run.
    table_id: str | None = None

    def remaining_s(self, now_s: float) -> float | None:
        """Seconds left at wall time `now_s` (None when the set carries no expiry)."""
        if self.expires_at_ms is None:
            return None
        return self.expires_at_ms / 1000.0 - now_s

    def __repr__(self) -> str:
        return (
            f"CredentialSet(location={self.location!r}, table_id={self.table_id!r}, "
            f"expires_at_ms={self.expires_at_ms!r}, "
            f"credentials={list(self.credentials)!r})"
        )


class CredentialLookup(NamedTuple):
    """The answer to a credential request: what was served and how.

    A NamedTuple, not a frozen dataclass: one is built per credential request, and a frozen
    dataclass's `__init__` (one `object.__setattr__` per field) costs ~2.3 µs on 3.11, a
    NamedTuple ~0.4 µs. Immutable all the same.
    """

    warehouse: Warehouse
    ref: TableRef
    access: AccessMode
    credentials: CredentialSet
    outcome: Outcome
    remaining_s: float | None
    # How long from now a caller may keep using this answer's table identity without asking
    # again (None: not stated, e.g. a surface that does not carry it).
    identity_ttl_s: float | None = None


@dataclass(frozen=True)
class GenericTable:
    """Lakekeeper's `GenericTableData` (the `table` object of a load/create response)."""

    name: str
    format: str
    base_location: str
    protected: bool = False
    doc: str | None = None
    properties: Mapping[str, str] = field(default_factory=dict)
    extra: Mapping[str, Any] = field(default_factory=dict)  # schema/statistics pass-through

    def __post_init__(self) -> None:
        object.__setattr__(self, "properties", _frozen_map(self.properties))
        object.__setattr__(self, "extra", _frozen_map(self.extra))


@dataclass(frozen=True, repr=False)
class LoadResult:
    """A loaded (or created) generic table, optionally with vended credentials."""

    table: GenericTable
    config: Mapping[str, str] | None
    credentials: tuple[StorageCredential, ...] | None
    warehouse: Warehouse
    outcome: Outcome | None = None  # credential cache outcome when vended

    def __post_init__(self) -> None:
        if self.config is not None:
            object.__setattr__(self, "config", _frozen_map(self.config))

    def __repr__(self) -> str:
        cfg = None if self.config is None else redacted_config(self.config)
        return (
            f"LoadResult(table={self.table!r}, config={cfg!r}, "
            f"credentials={self.credentials!r}, warehouse={self.warehouse!r})"
        )


@dataclass(frozen=True)
class TableIdentifier:
    """One entry of a list answer."""

    namespace: tuple[str, ...]
    name: str
    format: str | None = None
    id: str | None = None


@dataclass(frozen=True)
class ListResult:
    """A page of table identifiers."""

    identifiers: tuple[TableIdentifier, ...]
    next_page_token: str | None = None


@dataclass(frozen=True)
class CreateTableSpec:
    """A create request; `extra` passes unknown kebab keys (schema, statistics) through."""

    name: str
    format: str
    base_location: str | None = None
    doc: str | None = None
    properties: Mapping[str, str] | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.properties is not None:
            object.__setattr__(self, "properties", _frozen_map(self.properties))
        object.__setattr__(self, "extra", _frozen_map(self.extra))


class RequestContext(NamedTuple):
    """Per-request metadata passed from the surface down to the upstream call.

    A NamedTuple for the reason CredentialLookup is one (built per request); `_replace` makes
    a changed copy.
    """

    request_id: str
    idempotency_key: str | None = None
    project_id: str | None = None
    delegation: str | None = None  # X-Iceberg-Access-Delegation as received
    caller: CallerIdentity | None = None
    surface: str | None = None  # the request's surface (http|rest|aws|grpc), for the audit
    # The connection's (or Unix-socket process's) key, looked up only when asked: what tells
    # anonymous callers (mode `none`) apart where a per-caller record is kept (refusal holds).
    peer_key: Callable[[], str] | None = None


@dataclass(frozen=True)
class UpstreamResponse:
    """A raw upstream answer for allow-listed pass-through routes."""

    status: int
    headers: Mapping[str, str]
    body: bytes


def normalize_delegation(header: str | None) -> str:
    """The delegation mode part of a cache key.

    Lakekeeper's credentials endpoint treats a missing header, `vended-credentials` and
    `client-managed` alike (it always tries to vend), so they share one key: "vended".
    Anything else (e.g. `remote-signing`) is kept, trimmed and sorted, as its own mode.
    """
    if header is None:
        return "vended"
    modes = sorted({m.strip() for m in header.split(",") if m.strip()})
    if not modes or set(modes) <= {"vended-credentials", "client-managed"}:
        return "vended"
    return ",".join(modes)


@dataclass(frozen=True)
class CacheKey:
    """The credential cache key: names in their comparison form (`gateway.names.fold_*`), as
    Lakekeeper matches them.

    The upstream credential request names the table by these folded names too, so the entry
    holds what the catalog answers for exactly the form the policy decided on, whichever
    spelling filled it.
    """

    project: str
    warehouse_id: str
    namespace: tuple[str, ...]
    table: str
    access: AccessMode
    delegation: str = "vended"
    kind: TableKind = "generic"
    # Computed once: a key is hashed several times per cached answer (memo, cache, LRU order).
    _hash: int = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_hash", hash((self.project, self.warehouse_id, self.namespace,
                                                self.table, self.access, self.delegation,
                                                self.kind)))

    def __hash__(self) -> int:
        return self._hash

    def __eq__(self, other: object) -> bool:
        """Field equality (what the generated one does), decided by identity or the stored
        hash first: every cached answer looks its key up in dicts that may hold an equal key
        object of an earlier request, and the generated `__eq__` builds two 7-tuples per call."""
        if self is other:
            return True
        if other.__class__ is not CacheKey:
            return NotImplemented
        o: CacheKey = other
        return (self._hash == o._hash and self.table == o.table
                and self.namespace == o.namespace and self.warehouse_id == o.warehouse_id
                and self.project == o.project and self.access == o.access
                and self.delegation == o.delegation and self.kind == o.kind)

    @classmethod
    def of(
        cls,
        *,
        project: str | None,
        warehouse_id: str,
        namespace: tuple[str, ...],
        table: str,
        access: AccessMode,
        delegation: str | None = None,
        kind: TableKind = "generic",
    ) -> CacheKey:
        return cls(
            project=project or "",
            warehouse_id=warehouse_id.lower(),
            namespace=fold_namespace(namespace),
            table=fold_table(table, plus_is_space=kind == "iceberg"),
            access=access,
            delegation=normalize_delegation(delegation),
            kind=kind,
        )

    def same_table(self, warehouse_id: str, namespace: tuple[str, ...], table: str) -> bool:
        """Whether this key belongs to the given table (any access or delegation)."""
        return (
            self.warehouse_id == warehouse_id.lower()
            and self.namespace == fold_namespace(namespace)
            and self.table == fold_table(table, plus_is_space=self.kind == "iceberg")
        )
