"""Per-operation codecs: each gateway operation as one value that knows its HTTP request and
JSON answer (``_http_codec``) and its gRPC method, request and reply (``_proto``).

Why: a transport then has a single ``send(op)`` — build, send, parse is written once per
transport instead of once per operation per transport. Nothing here does I/O.

The gRPC halves import ``_proto`` and the generated stubs inside the method: only the gRPC
transport calls them, so the core client (HTTP) imports neither grpcio nor protobuf, and works
next to whatever versions an executor image pins (the ``grpc`` extra brings them).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from lakegate_client import _http_codec as http
from lakegate_client._models import Access, LoadedTable, TableIdentifier, TableRef, TableSpec
from lakegate_client.credentials import TableCredentials

if TYPE_CHECKING:
    from google.protobuf.message import Message

__all__ = [
    "CreateTable",
    "DropTable",
    "GetCredentials",
    "ListPage",
    "LoadTable",
    "Operation",
    "Page",
    "RenameTable",
    "new_idempotency_key",
]

R_co = TypeVar("R_co", covariant=True)
Page = tuple[list[TableIdentifier], str | None]


class Operation(Protocol[R_co]):
    """One request/answer pair, encodable for both wire protocols."""

    @property
    def rpc(self) -> str:
        """``"<credentials|catalog>.<Rpc>"``: the gRPC service and method."""
        ...

    def http(self) -> http.HttpRequest:
        """The native HTTP API request."""
        ...

    def from_json(self, body: Any) -> R_co:
        """The decoded JSON answer (``{}`` for an empty body) → the result."""
        ...

    def grpc(self) -> Message:
        """The gRPC request message."""
        ...

    def from_proto(self, msg: Any) -> R_co:
        """The gRPC reply → the result."""
        ...


def new_idempotency_key() -> str:
    """A fresh Idempotency-Key, so a retried create is not applied twice."""
    return str(uuid.uuid4())


@dataclass(frozen=True)
class GetCredentials:
    """Vended credentials for one table."""

    ref: TableRef
    access: Access
    expected_location: str | None = None
    table_id: str | None = None
    rpc: str = field(default="credentials.GetTableCredentials", init=False)

    def http(self) -> http.HttpRequest:
        return http.http_credentials(self.ref, self.access, self.expected_location,
                                     self.table_id)

    def from_json(self, body: Any) -> TableCredentials:
        return http.credentials_from_json(body, self.ref, self.access)

    def grpc(self) -> Message:
        from lakegate_client import _proto as proto

        return proto.grpc_credentials_request(self.ref, self.access, self.expected_location,
                                              self.table_id)

    def from_proto(self, msg: Any) -> TableCredentials:
        from lakegate_client import _proto as proto

        return proto.credentials_from_proto(msg, self.ref, self.access)


@dataclass(frozen=True)
class LoadTable:
    """A table's metadata (with credentials when ``vended``)."""

    ref: TableRef
    vended: bool
    access: Access
    rpc: str = field(default="catalog.LoadTable", init=False)

    def http(self) -> http.HttpRequest:
        return http.http_load(self.ref, self.vended, self.access)

    def from_json(self, body: Any) -> LoadedTable:
        return http.loaded_from_json(body, self.ref, self.access, self.vended)

    def grpc(self) -> Message:
        from lakegate.v1 import catalog_pb2
        from lakegate_client import _proto as proto

        return catalog_pb2.LoadTableRequest(
            table=proto.table_ref_proto(self.ref),
            vended=self.vended,
            access=proto.access_proto(self.access),
        )

    def from_proto(self, msg: Any) -> LoadedTable:
        from lakegate_client import _proto as proto

        return proto.loaded_from_proto(msg, self.ref, self.access, self.vended)


@dataclass(frozen=True)
class ListPage:
    """One page of a namespace's tables."""

    warehouse: str
    namespace: tuple[str, ...]
    page_token: str | None
    rpc: str = field(default="catalog.ListTables", init=False)

    def http(self) -> http.HttpRequest:
        return http.http_list(self.warehouse, self.namespace, self.page_token, None)

    def from_json(self, body: Any) -> Page:
        return http.identifiers_from_json(body)

    def grpc(self) -> Message:
        from lakegate.v1 import catalog_pb2

        return catalog_pb2.ListTablesRequest(
            warehouse=self.warehouse,
            namespace=list(self.namespace),
            page_token=self.page_token or "",
        )

    def from_proto(self, msg: Any) -> Page:
        from lakegate_client import _proto as proto

        return proto.identifiers_from_proto(msg)


@dataclass(frozen=True)
class CreateTable:
    """Create a generic table (the answer never carries credentials)."""

    ref: TableRef
    spec: TableSpec
    idempotency_key: str = field(default_factory=new_idempotency_key)
    rpc: str = field(default="catalog.CreateTable", init=False)

    def http(self) -> http.HttpRequest:
        return http.http_create(self.ref, self.spec, self.idempotency_key)

    def from_json(self, body: Any) -> LoadedTable:
        return http.loaded_from_json(body, self.ref, "read", False)

    def grpc(self) -> Message:
        from lakegate_client import _proto as proto

        return proto.grpc_create_request(self.ref, self.spec, self.idempotency_key)

    def from_proto(self, msg: Any) -> LoadedTable:
        from lakegate_client import _proto as proto

        return proto.loaded_from_proto(msg, self.ref, "read", False)


class _NoAnswer:
    """For operations whose answer carries nothing (HTTP 204, gRPC Empty)."""

    def from_json(self, body: Any) -> None:
        return None

    def from_proto(self, msg: Any) -> None:
        return None


@dataclass(frozen=True)
class DropTable(_NoAnswer):
    """Drop a table (``purge`` also deletes its data)."""

    ref: TableRef
    purge: bool = False
    force: bool = False
    rpc: str = field(default="catalog.DropTable", init=False)

    def http(self) -> http.HttpRequest:
        return http.http_drop(self.ref, self.purge, self.force)

    def grpc(self) -> Message:
        from lakegate.v1 import catalog_pb2
        from lakegate_client import _proto as proto

        return catalog_pb2.DropTableRequest(
            table=proto.table_ref_proto(self.ref), purge=self.purge, force=self.force
        )


@dataclass(frozen=True)
class RenameTable(_NoAnswer):
    """Rename a table within its warehouse."""

    source: TableRef
    destination: TableRef
    rpc: str = field(default="catalog.RenameTable", init=False)

    def http(self) -> http.HttpRequest:
        return http.http_rename(self.source, self.destination)

    def grpc(self) -> Message:
        from lakegate_client import _proto as proto

        return proto.grpc_rename_request(self.source, self.destination)

