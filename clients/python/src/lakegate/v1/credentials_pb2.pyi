from lakegate.v1 import common_pb2 as _common_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class GetTableCredentialsRequest(_message.Message):
    __slots__ = ("table", "access", "kind", "expected_location", "table_id")
    TABLE_FIELD_NUMBER: _ClassVar[int]
    ACCESS_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    EXPECTED_LOCATION_FIELD_NUMBER: _ClassVar[int]
    TABLE_ID_FIELD_NUMBER: _ClassVar[int]
    table: _common_pb2.TableRef
    access: _common_pb2.AccessMode
    kind: str
    expected_location: str
    table_id: str
    def __init__(self, table: _Optional[_Union[_common_pb2.TableRef, _Mapping]] = ..., access: _Optional[_Union[_common_pb2.AccessMode, str]] = ..., kind: _Optional[str] = ..., expected_location: _Optional[str] = ..., table_id: _Optional[str] = ...) -> None: ...

class GetTableCredentialsResponse(_message.Message):
    __slots__ = ("warehouse_id", "location", "credentials", "expires_at_ms", "remaining_seconds", "outcome", "access", "table_id", "identity_ttl_seconds")
    WAREHOUSE_ID_FIELD_NUMBER: _ClassVar[int]
    LOCATION_FIELD_NUMBER: _ClassVar[int]
    CREDENTIALS_FIELD_NUMBER: _ClassVar[int]
    EXPIRES_AT_MS_FIELD_NUMBER: _ClassVar[int]
    REMAINING_SECONDS_FIELD_NUMBER: _ClassVar[int]
    OUTCOME_FIELD_NUMBER: _ClassVar[int]
    ACCESS_FIELD_NUMBER: _ClassVar[int]
    TABLE_ID_FIELD_NUMBER: _ClassVar[int]
    IDENTITY_TTL_SECONDS_FIELD_NUMBER: _ClassVar[int]
    warehouse_id: str
    location: str
    credentials: _containers.RepeatedCompositeFieldContainer[_common_pb2.StorageCredential]
    expires_at_ms: int
    remaining_seconds: float
    outcome: _common_pb2.CacheOutcome
    access: _common_pb2.AccessMode
    table_id: str
    identity_ttl_seconds: float
    def __init__(self, warehouse_id: _Optional[str] = ..., location: _Optional[str] = ..., credentials: _Optional[_Iterable[_Union[_common_pb2.StorageCredential, _Mapping]]] = ..., expires_at_ms: _Optional[int] = ..., remaining_seconds: _Optional[float] = ..., outcome: _Optional[_Union[_common_pb2.CacheOutcome, str]] = ..., access: _Optional[_Union[_common_pb2.AccessMode, str]] = ..., table_id: _Optional[str] = ..., identity_ttl_seconds: _Optional[float] = ...) -> None: ...

class InvalidateCredentialsRequest(_message.Message):
    __slots__ = ("table", "all")
    TABLE_FIELD_NUMBER: _ClassVar[int]
    ALL_FIELD_NUMBER: _ClassVar[int]
    table: _common_pb2.TableRef
    all: bool
    def __init__(self, table: _Optional[_Union[_common_pb2.TableRef, _Mapping]] = ..., all: bool = ...) -> None: ...

class InvalidateCredentialsResponse(_message.Message):
    __slots__ = ("invalidated",)
    INVALIDATED_FIELD_NUMBER: _ClassVar[int]
    invalidated: int
    def __init__(self, invalidated: _Optional[int] = ...) -> None: ...
