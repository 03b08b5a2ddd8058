"""lakegate_client: get a table's storage credentials from the node's Lakegate in one line.

>>> from lakegate_client import Client
>>> creds = Client().credentials("demo_ns", "orders")          # $LAKEGATE_URL, $LAKEGATE_WAREHOUSE
>>> lance.dataset(creds.location, storage_options=creds.lance_storage_options())

Installing this package never pulls the gateway daemon's server dependencies.
"""

from lakegate_client._client import AsyncClient, Client, ClientState
from lakegate_client._config import ClientConfig, Endpoint, parse_url
from lakegate_client._errors import (
    ClientClosedError,
    ConfigurationError,
    ConflictError,
    GatewayConnectionError,
    GatewayTimeoutError,
    InternalError,
    InvalidRequestError,
    LakegateError,
    NotFoundError,
    PermissionDeniedError,
    RateLimitedError,
    TableIdentityMismatchError,
    UnauthenticatedError,
    UnavailableError,
    UnsupportedStorageError,
)
from lakegate_client._models import LoadedTable, TableIdentifier
from lakegate_client.credentials import StorageCredential, TableCredentials

__version__ = "0.1.0"

__all__ = [
    "AsyncClient",
    "Client",
    "ClientClosedError",
    "ClientConfig",
    "ClientState",
    "ConfigurationError",
    "ConflictError",
    "Endpoint",
    "GatewayConnectionError",
    "GatewayTimeoutError",
    "InternalError",
    "InvalidRequestError",
    "LakegateError",
    "LoadedTable",
    "NotFoundError",
    "PermissionDeniedError",
    "RateLimitedError",
    "StorageCredential",
    "TableCredentials",
    "TableIdentifier",
    "TableIdentityMismatchError",
    "UnauthenticatedError",
    "UnavailableError",
    "UnsupportedStorageError",
    "__version__",
    "parse_url",
]
