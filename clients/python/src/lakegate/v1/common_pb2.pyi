from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional

DESCRIPTOR: _descriptor.FileDescriptor

class AccessMode(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    ACCESS_MODE_UNSPECIFIED: _ClassVar[AccessMode]
    ACCESS_MODE_READ: _ClassVar[AccessMode]
    ACCESS_MODE_WRITE: _ClassVar[AccessMode]

class CacheOutcome(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    CACHE_OUTCOME_UNSPECIFIED: _ClassVar[CacheOutcome]
    CACHE_OUTCOME_HIT: _ClassVar[CacheOutcome]
    CACHE_OUTCOME_MISS: _ClassVar[CacheOutcome]
    CACHE_OUTCOME_COALESCED: _ClassVar[CacheOutcome]
    CACHE_OUTCOME_STALE: _ClassVar[CacheOutcome]
ACCESS_MODE_UNSPECIFIED: AccessMode
ACCESS_MODE_READ: AccessMode
ACCESS_MODE_WRITE: AccessMode
CACHE_OUTCOME_UNSPECIFIED: CacheOutcome
CACHE_OUTCOME_HIT: CacheOutcome
CACHE_OUTCOME_MISS: CacheOutcome
CACHE_OUTCOME_COALESCED: CacheOutcome
CACHE_OUTCOME_STALE: CacheOutcome

class TableRef(_message.Message):
    __slots__ = ("warehouse", "namespace", "name")
    WAREHOUSE_FIELD_NUMBER: _ClassVar[int]
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    warehouse: str
    namespace: _containers.RepeatedScalarFieldContainer[str]
    name: str
    def __init__(self, warehouse: _Optional[str] = ..., namespace: _Optional[_Iterable[str]] = ..., name: _Optional[str] = ...) -> None: ...

class StorageCredential(_message.Message):
    __slots__ = ("prefix", "config", "expires_at_ms")
    class ConfigEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    PREFIX_FIELD_NUMBER: _ClassVar[int]
    CONFIG_FIELD_NUMBER: _ClassVar[int]
    EXPIRES_AT_MS_FIELD_NUMBER: _ClassVar[int]
    prefix: str
    config: _containers.ScalarMap[str, str]
    expires_at_ms: int
    def __init__(self, prefix: _Optional[str] = ..., config: _Optional[_Mapping[str, str]] = ..., expires_at_ms: _Optional[int] = ...) -> None: ...

class GenericTable(_message.Message):
    __slots__ = ("name", "format", "base_location", "protected", "doc", "properties")
    class PropertiesEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    NAME_FIELD_NUMBER: _ClassVar[int]
    FORMAT_FIELD_NUMBER: _ClassVar[int]
    BASE_LOCATION_FIELD_NUMBER: _ClassVar[int]
    PROTECTED_FIELD_NUMBER: _ClassVar[int]
    DOC_FIELD_NUMBER: _ClassVar[int]
    PROPERTIES_FIELD_NUMBER: _ClassVar[int]
    name: str
    format: str
    base_location: str
    protected: bool
    doc: str
    properties: _containers.ScalarMap[str, str]
    def __init__(self, name: _Optional[str] = ..., format: _Optional[str] = ..., base_location: _Optional[str] = ..., protected: bool = ..., doc: _Optional[str] = ..., properties: _Optional[_Mapping[str, str]] = ...) -> None: ...

class TableIdentifier(_message.Message):
    __slots__ = ("namespace", "name", "format", "id")
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    FORMAT_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    namespace: _containers.RepeatedScalarFieldContainer[str]
    name: str
    format: str
    id: str
    def __init__(self, namespace: _Optional[_Iterable[str]] = ..., name: _Optional[str] = ..., format: _Optional[str] = ..., id: _Optional[str] = ...) -> None: ...

class ErrorDetail(_message.Message):
    __slots__ = ("type", "message", "http_status", "request_id")
    TYPE_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    HTTP_STATUS_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    type: str
    message: str
    http_status: int
    request_id: str
    def __init__(self, type: _Optional[str] = ..., message: _Optional[str] = ..., http_status: _Optional[int] = ..., request_id: _Optional[str] = ...) -> None: ...
