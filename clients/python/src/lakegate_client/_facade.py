"""What Client and AsyncClient share: configuration, lifecycle and per-process state.

Both keep their per-process state (transport, memo, lock) in a ``_ProcessLocal`` tagged with the
pid that built it. Every call compares that pid with ``os.getpid()``: after a fork the child builds
fresh state, so it never sends on, closes, or locks anything its parent made (PySpark forks its
Python workers from a daemon that may already have used the client). The parent's inherited
objects are kept referenced and untouched, so their finalizers cannot run in the child either.
"""

from __future__ import annotations

import dataclasses
import enum
import os
import threading
from collections.abc import Callable, Mapping
from types import ModuleType
from typing import Generic, TypeVar

from lakegate_client._clock import Clock, SystemClock
from lakegate_client._config import ClientConfig
from lakegate_client._errors import (
    ClientClosedError,
    ConfigurationError,
    GatewayConnectionError,
    GatewayTimeoutError,
)
from lakegate_client._memo import CredentialMemo, MemoKey, memo_key
from lakegate_client._models import (
    Namespace,
    TableRef,
    TableSpec,
    check_access,
    check_kind,
    normalize_namespace,
)
from lakegate_client._ops import CreateTable, DropTable, GetCredentials, LoadTable, RenameTable
from lakegate_client.credentials import TableCredentials

__all__ = [
    "GRPC_EXTRA",
    "UNREACHABLE",
    "ClientState",
    "CredentialsCall",
    "Facade",
    "grpc_transports",
    "resolve_warehouse",
    "uses_grpc",
]

T = TypeVar("T")
GRPC_EXTRA = "lakegate-client[grpc]"
# The gateway could not be reached at all (not an answer of the gateway's).
UNREACHABLE = (GatewayConnectionError, GatewayTimeoutError)


def uses_grpc(config: ClientConfig) -> bool:
    """Whether the URL's scheme picks the gRPC transport."""
    return config.endpoint.protocol == "grpc"


def grpc_transports() -> ModuleType:
    """The gRPC transport module, or a ConfigurationError naming the extra that brings it.

    Why imported here and only here: the core client depends on httpx alone, so grpcio and
    protobuf may be missing, or be an executor image's older pins that the committed stubs
    refuse (ImportError for a missing package or module, RuntimeError from the stubs' grpcio
    check, protobuf's VersionError); every one of them means the same fix.
    """
    try:
        from lakegate_client import _grpc as transports
    except Exception as exc:
        raise ConfigurationError(
            f"grpc:// and grpc+unix: URLs need the gRPC extra: pip install '{GRPC_EXTRA}'"
            f" (grpcio>=1.72.1, protobuf>=6.30,<8); importing it failed:"
            f" {type(exc).__name__}: {exc}"
        ) from exc
    return transports


def resolve_warehouse(config: ClientConfig, warehouse: str | None) -> str:
    """The call's warehouse, else the configured default.

    Raises:
        ConfigurationError: neither was given.
    """
    chosen = warehouse or config.warehouse
    if not chosen:
        raise ConfigurationError("no warehouse: pass warehouse=... or set LAKEGATE_WAREHOUSE")
    return chosen


class ClientState(enum.Enum):
    """Lifecycle: a client opens on first use (or ``with``) and cannot be used after close."""

    UNOPENED = "unopened"
    OPENED = "opened"
    CLOSED = "closed"


class _ProcessLocal(Generic[T]):
    """Everything that must not cross a fork: the transport, the memo and the lock guarding them."""

    def __init__(self, config: ClientConfig, clock: Clock) -> None:
        self.pid = os.getpid()
        self.lock = threading.Lock()
        self.memo = CredentialMemo(clock, config.memo_floor_s, config.memo_max_entries)
        self.transport: T | None = None


class CredentialsCall:
    """One ``credentials(...)`` call: the memo's rule, written once for Client and AsyncClient.

    ``memoised`` answers without the gateway while the credential is above the floor and the
    gateway's stated ``identity_ttl_s`` (counted from when it was asked) has not passed, and only
    for the identity the caller expects (a memo entry for another table is bypassed: a Python
    worker outlives the job that filled it). Otherwise the caller sends ``op`` and hands the
    answer to :meth:`answered`, or a transport failure to :meth:`unreachable`.
    """

    __slots__ = ("_asked", "_key", "_memo", "op")

    def __init__(self, op: GetCredentials, key: MemoKey, memo: CredentialMemo | None,
                 asked_mono: float) -> None:
        self.op = op
        self._key = key
        self._memo = memo
        self._asked = asked_mono

    def _for_caller(self, creds: TableCredentials | None) -> TableCredentials | None:
        if creds is None or not creds.is_identity(self.op.expected_location, self.op.table_id):
            return None
        return dataclasses.replace(creds, outcome="memo")

    @property
    def memoised(self) -> TableCredentials | None:
        """The memo's answer, or None: ask the gateway."""
        return self._for_caller(self._memo.get(self._key)) if self._memo is not None else None

    def answered(self, creds: TableCredentials) -> TableCredentials:
        """The gateway's answer, remembered for the next caller of this process."""
        if self._memo is not None:
            self._memo.put(self._key, creds, self._asked)
        return creds

    def unreachable(self) -> TableCredentials | None:
        """The memo's last answer when the gateway cannot be reached (connection refused or
        timed out), however old its identity, as the gateway serves while its catalog is
        unreachable; None: the failure is the caller's."""
        if self._memo is None:
            return None
        return self._for_caller(self._memo.unconfirmed(self._key))


class Facade(Generic[T]):
    """What Client and AsyncClient share: config, lifecycle, per-process state, argument checks."""

    def __init__(
        self,
        url: str | None = None,
        *,
        token: str | None = None,
        warehouse: str | None = None,
        timeout_s: float | None = None,
        memo: bool = True,
        memo_floor_s: float | None = None,
        clock: Clock | None = None,
        config: ClientConfig | None = None,
        transport_factory: Callable[[ClientConfig], T] | None = None,
    ) -> None:
        self._config = config or ClientConfig.resolve(
            url, token=token, warehouse=warehouse, timeout_s=timeout_s, memo_floor_s=memo_floor_s
        )
        self._clock: Clock = clock or SystemClock()
        self._use_memo = memo
        self._factory = transport_factory or self._default_transport
        self._state = ClientState.UNOPENED
        self._local: _ProcessLocal[T] = _ProcessLocal(self._config, self._clock)
        # Objects inherited from a parent process: kept alive, never used or closed here.
        self._inherited: list[_ProcessLocal[T]] = []

    def _default_transport(self, config: ClientConfig) -> T:
        """The transport the URL's scheme picks (Client: blocking, AsyncClient: asyncio)."""
        raise NotImplementedError

    @property
    def config(self) -> ClientConfig:
        """The resolved configuration."""
        return self._config

    @property
    def state(self) -> ClientState:
        """Where the client is in its lifecycle."""
        return self._state

    def _process_local(self) -> _ProcessLocal[T]:
        local = self._local
        if local.pid != os.getpid():
            # First use in a forked child. Racing threads may each build one; the loser's
            # state is merely dropped, which is safe because it was built in this process.
            self._inherited.append(local)
            local = _ProcessLocal(self._config, self._clock)
            self._local = local
        return local

    def _transport(self) -> T:
        if self._state is ClientState.CLOSED:
            raise ClientClosedError("this lakegate client is closed", type="ClientClosed")
        local = self._process_local()
        transport = local.transport
        if transport is None:
            with local.lock:
                if local.transport is None:
                    local.transport = self._factory(self._config)
                transport = local.transport
        self._state = ClientState.OPENED
        return transport

    @property
    def connection_id(self) -> str:
        """``<pid>:<channel id>`` of this process's transport (opens it if needed)."""
        return str(self._transport().connection_id)  # type: ignore[attr-defined]

    def _ref(self, namespace: Namespace, table: str, warehouse: str | None) -> TableRef:
        if not table:
            raise ConfigurationError("table name must not be empty")
        return TableRef(
            warehouse=resolve_warehouse(self._config, warehouse),
            namespace=normalize_namespace(namespace),
            name=table,
        )

    def _namespace_ref(
        self, namespace: Namespace, warehouse: str | None
    ) -> tuple[str, tuple[str, ...]]:
        return resolve_warehouse(self._config, warehouse), normalize_namespace(namespace)

    # -- arguments → operations (shared by the blocking and the asyncio facade) -----------------

    def _credentials_call(
        self,
        namespace: Namespace,
        table: str,
        warehouse: str | None,
        access: str,
        kind: str = "generic",
        expected_location: str | None = None,
        table_id: str | None = None,
    ) -> CredentialsCall:
        """What ``credentials(...)`` does, decided once for both facades: the memo's answer
        while the gateway's word on its identity holds, else the operation to send."""
        checked = check_access(access)
        ref = dataclasses.replace(self._ref(namespace, table, warehouse), kind=check_kind(kind))
        op = GetCredentials(ref, checked, expected_location or None, table_id or None)
        key = memo_key(self._config.endpoint.url, ref, checked)
        memo = self._process_local().memo if self._use_memo else None
        return CredentialsCall(op, key, memo, self._clock.monotonic())

    def _load_op(
        self, namespace: Namespace, table: str, warehouse: str | None, vended: bool, access: str
    ) -> LoadTable:
        checked = check_access(access)
        return LoadTable(self._ref(namespace, table, warehouse), vended, checked)

    def _create_op(
        self,
        namespace: Namespace,
        table: str,
        format: str,
        base_location: str | None,
        warehouse: str | None,
        doc: str | None,
        properties: Mapping[str, str] | None,
    ) -> CreateTable:
        spec = TableSpec(format, base_location, doc, properties)
        return CreateTable(self._ref(namespace, table, warehouse), spec)

    def _drop_op(
        self, namespace: Namespace, table: str, warehouse: str | None, purge: bool, force: bool
    ) -> DropTable:
        ref = self._ref(namespace, table, warehouse)
        self._memo_forget(ref)
        return DropTable(ref, purge=purge, force=force)

    def _rename_op(
        self,
        namespace: Namespace,
        table: str,
        new_namespace: Namespace,
        new_table: str,
        warehouse: str | None,
    ) -> RenameTable:
        source = self._ref(namespace, table, warehouse)
        destination = self._ref(new_namespace, new_table, source.warehouse)
        self._memo_forget(source)
        return RenameTable(source, destination)

    # -- per-process memo ---------------------------------------------------------------------

    def _memo_forget(self, ref: TableRef) -> None:
        self._process_local().memo.forget_table(self._config.endpoint.url, ref)

    def _begin_close(self) -> T | None:
        """Mark the client closed; the transport to release, if this process made one.

        A child never closes its parent's channel: closing could shut down a socket the parent
        still uses.
        """
        if self._state is ClientState.CLOSED:
            return None
        self._state = ClientState.CLOSED
        local = self._local
        if local.pid != os.getpid():
            return None
        transport, local.transport = local.transport, None
        return transport

    def clear_memo(self) -> None:
        """Forget every memoised credential of this process."""
        self._process_local().memo.clear()

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(url={self._config.endpoint.url!r}, state={self._state.value})"
        )
