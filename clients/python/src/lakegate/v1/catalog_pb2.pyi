from lakegate.v1 import common_pb2 as _common_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class LoadTableRequest(_message.Message):
    __slots__ = ("table", "vended", "access")
    TABLE_FIELD_NUMBER: _ClassVar[int]
    VENDED_FIELD_NUMBER: _ClassVar[int]
    ACCESS_FIELD_NUMBER: _ClassVar[int]
    table: _common_pb2.TableRef
    vended: bool
    access: _common_pb2.AccessMode
    def __init__(self, table: _Optional[_Union[_common_pb2.TableRef, _Mapping]] = ..., vended: bool = ..., access: _Optional[_Union[_common_pb2.AccessMode, str]] = ...) -> None: ...

class LoadTableResponse(_message.Message):
    __slots__ = ("table", "config", "credentials", "warehouse_id")
    class ConfigEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    TABLE_FIELD_NUMBER: _ClassVar[int]
    CONFIG_FIELD_NUMBER: _ClassVar[int]
    CREDENTIALS_FIELD_NUMBER: _ClassVar[int]
    WAREHOUSE_ID_FIELD_NUMBER: _ClassVar[int]
    table: _common_pb2.GenericTable
    config: _containers.ScalarMap[str, str]
    credentials: _containers.RepeatedCompositeFieldContainer[_common_pb2.StorageCredential]
    warehouse_id: str
    def __init__(self, table: _Optional[_Union[_common_pb2.GenericTable, _Mapping]] = ..., config: _Optional[_Mapping[str, str]] = ..., credentials: _Optional[_Iterable[_Union[_common_pb2.StorageCredential, _Mapping]]] = ..., warehouse_id: _Optional[str] = ...) -> None: ...

class ListTablesRequest(_message.Message):
    __slots__ = ("warehouse", "namespace", "page_token", "page_size")
    WAREHOUSE_FIELD_NUMBER: _ClassVar[int]
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    warehouse: str
    namespace: _containers.RepeatedScalarFieldContainer[str]
    page_token: str
    page_size: int
    def __init__(self, warehouse: _Optional[str] = ..., namespace: _Optional[_Iterable[str]] = ..., page_token: _Optional[str] = ..., page_size: _Optional[int] = ...) -> None: ...

class ListTablesResponse(_message.Message):
    __slots__ = ("identifiers", "next_page_token")
    IDENTIFIERS_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    identifiers: _containers.RepeatedCompositeFieldContainer[_common_pb2.TableIdentifier]
    next_page_token: str
    def __init__(self, identifiers: _Optional[_Iterable[_Union[_common_pb2.TableIdentifier, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class CreateTableRequest(_message.Message):
    __slots__ = ("table", "format", "base_location", "doc", "properties", "idempotency_key")
    class PropertiesEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    TABLE_FIELD_NUMBER: _ClassVar[int]
    FORMAT_FIELD_NUMBER: _ClassVar[int]
    BASE_LOCATION_FIELD_NUMBER: _ClassVar[int]
    DOC_FIELD_NUMBER: _ClassVar[int]
    PROPERTIES_FIELD_NUMBER: _ClassVar[int]
    IDEMPOTENCY_KEY_FIELD_NUMBER: _ClassVar[int]
    table: _common_pb2.TableRef
    format: str
    base_location: str
    doc: str
    properties: _containers.ScalarMap[str, str]
    idempotency_key: str
    def __init__(self, table: _Optional[_Union[_common_pb2.TableRef, _Mapping]] = ..., format: _Optional[str] = ..., base_location: _Optional[str] = ..., doc: _Optional[str] = ..., properties: _Optional[_Mapping[str, str]] = ..., idempotency_key: _Optional[str] = ...) -> None: ...

class DropTableRequest(_message.Message):
    __slots__ = ("table", "purge", "force")
    TABLE_FIELD_NUMBER: _ClassVar[int]
    PURGE_FIELD_NUMBER: _ClassVar[int]
    FORCE_FIELD_NUMBER: _ClassVar[int]
    table: _common_pb2.TableRef
    purge: bool
    force: bool
    def __init__(self, table: _Optional[_Union[_common_pb2.TableRef, _Mapping]] = ..., purge: bool = ..., force: bool = ...) -> None: ...

class DropTableResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class RenameTableRequest(_message.Message):
    __slots__ = ("warehouse", "source_namespace", "source_name", "destination_namespace", "destination_name")
    WAREHOUSE_FIELD_NUMBER: _ClassVar[int]
    SOURCE_NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    SOURCE_NAME_FIELD_NUMBER: _ClassVar[int]
    DESTINATION_NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    DESTINATION_NAME_FIELD_NUMBER: _ClassVar[int]
    warehouse: str
    source_namespace: _containers.RepeatedScalarFieldContainer[str]
    source_name: str
    destination_namespace: _containers.RepeatedScalarFieldContainer[str]
    destination_name: str
    def __init__(self, warehouse: _Optional[str] = ..., source_namespace: _Optional[_Iterable[str]] = ..., source_name: _Optional[str] = ..., destination_namespace: _Optional[_Iterable[str]] = ..., destination_name: _Optional[str] = ...) -> None: ...

class RenameTableResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ResolveWarehouseRequest(_message.Message):
    __slots__ = ("warehouse",)
    WAREHOUSE_FIELD_NUMBER: _ClassVar[int]
    warehouse: str
    def __init__(self, warehouse: _Optional[str] = ...) -> None: ...

class ResolveWarehouseResponse(_message.Message):
    __slots__ = ("warehouse_id", "name")
    WAREHOUSE_ID_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    warehouse_id: str
    name: str
    def __init__(self, warehouse_id: _Optional[str] = ..., name: _Optional[str] = ...) -> None: ...
