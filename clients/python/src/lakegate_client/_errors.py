"""The client's one exception tree.

Every failure a caller can see is a ``LakegateError``; transport libraries' exceptions (httpx,
aiohttp, grpc, OSError) are translated once, at the transport boundary, with ``raise ... from``::

    LakegateError                      status, type, message, request_id
    ├── ConfigurationError             bad LAKEGATE_URL, no warehouse... (nothing was sent)
    ├── ClientClosedError              the client was used after close()
    ├── UnsupportedStorageError        an adapter that the credential's storage cannot serve
    ├── InvalidRequestError            400 / INVALID_ARGUMENT
    ├── UnauthenticatedError           401 / UNAUTHENTICATED
    ├── PermissionDeniedError          403 / PERMISSION_DENIED (caller policy, forgeable request)
    ├── NotFoundError                  404 / NOT_FOUND (table, namespace, warehouse)
    ├── ConflictError                  409 / ALREADY_EXISTS, ABORTED
    │   └── TableIdentityMismatchError 409 / FAILED_PRECONDITION: not the expected table
    ├── RateLimitedError               429 / RESOURCE_EXHAUSTED  (retry_after_s)
    ├── UnavailableError               502, 503, 504, 412 / UNAVAILABLE with a gateway error detail
    ├── InternalError                  other 5xx / INTERNAL, UNKNOWN
    ├── GatewayConnectionError         could not reach the gateway (refused, socket missing, reset)
    └── GatewayTimeoutError            the call's deadline passed (also a builtin TimeoutError)

Messages carry the gateway's own message (which never contains secrets) and never a token.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import TypedDict, Unpack

__all__ = [
    "ClientClosedError",
    "ConfigurationError",
    "ConflictError",
    "GatewayConnectionError",
    "GatewayTimeoutError",
    "InternalError",
    "InvalidRequestError",
    "LakegateError",
    "NotFoundError",
    "PermissionDeniedError",
    "RateLimitedError",
    "TableIdentityMismatchError",
    "UnauthenticatedError",
    "UnavailableError",
    "UnsupportedStorageError",
    "error_for_status",
]


class ErrorFields(TypedDict, total=False):
    """The keyword fields every :class:`LakegateError` takes (so subclasses pass them on)."""

    status: int | None
    type: str
    request_id: str


class LakegateError(Exception):
    """Root of every error the client raises.

    Attributes:
        status: the HTTP status the gateway answered (or its gRPC equivalent), 0 if none.
        type: the Lakekeeper error type (``NoSuchGenericTableException``...) or a client label.
        message: the gateway's message.
        request_id: the gateway's ``Error ID`` when it sent one.
    """

    default_status: int = 0

    def __init__(
        self,
        message: str,
        *,
        status: int | None = None,
        type: str = "",
        request_id: str = "",
    ) -> None:
        super().__init__(message)
        self.message = message
        self.status = self.default_status if status is None else status
        self.type = type or self.__class__.__name__
        self.request_id = request_id

    def __str__(self) -> str:
        parts = [self.message]
        if self.status:
            parts.append(f"status={self.status}")
        if self.type:
            parts.append(f"type={self.type}")
        if self.request_id:
            parts.append(f"request_id={self.request_id}")
        return " ".join([parts[0], f"({', '.join(parts[1:])})"]) if len(parts) > 1 else parts[0]


class ConfigurationError(LakegateError, ValueError):
    """The client was given a configuration it cannot use (nothing was sent)."""


class ClientClosedError(LakegateError, RuntimeError):
    """The client was used after ``close()`` / ``aclose()``."""


class UnsupportedStorageError(LakegateError, ValueError):
    """The credential is for a storage that this adapter's library cannot take."""


class InvalidRequestError(LakegateError):
    """The gateway rejected the request as malformed (400)."""

    default_status = 400


class UnauthenticatedError(LakegateError):
    """The caller token was missing, unknown or expired (401)."""

    default_status = 401


class PermissionDeniedError(LakegateError):
    """The caller may not do this (403): caller policy, or a forgeable request refused."""

    default_status = 403


class NotFoundError(LakegateError):
    """The table, namespace or warehouse does not exist (404)."""

    default_status = 404


class ConflictError(LakegateError):
    """The table already exists, or a concurrent change won (409)."""

    default_status = 409


class TableIdentityMismatchError(ConflictError):
    """The catalog's table is not the one named by ``expected_location`` / ``table_id``: it was
    dropped, replaced or renamed since the caller planned. Retrying does not help; plan again."""


class RateLimitedError(LakegateError):
    """The gateway's per-caller rate limit refused the call (429).

    Attributes:
        retry_after_s: seconds the gateway asked to wait, when it said.
    """

    default_status = 429

    def __init__(
        self, message: str, *, retry_after_s: float | None = None, **fields: Unpack[ErrorFields]
    ) -> None:
        super().__init__(message, **fields)
        self.retry_after_s = retry_after_s


class UnavailableError(LakegateError):
    """The gateway or its upstream (catalog, IdP, STS) cannot serve right now (502/503/504/412)."""

    default_status = 503


class InternalError(LakegateError):
    """The gateway failed unexpectedly (500); quote ``request_id`` when reporting it."""

    default_status = 500


class GatewayConnectionError(LakegateError, ConnectionError):
    """The gateway could not be reached at all (refused, missing socket, reset)."""


class GatewayTimeoutError(LakegateError, TimeoutError):
    """The call's deadline passed before the gateway answered."""


_BY_STATUS: Mapping[int, type[LakegateError]] = MappingProxyType(
    {
        400: InvalidRequestError,
        401: UnauthenticatedError,
        403: PermissionDeniedError,
        404: NotFoundError,
        409: ConflictError,
        412: UnavailableError,  # Lakekeeper's ShortTermCredentialError: STS/SAS failed upstream
        422: InvalidRequestError,
        429: RateLimitedError,
        500: InternalError,
        502: UnavailableError,
        503: UnavailableError,
        504: UnavailableError,
    }
)


def error_for_status(status: int, type_: str = "") -> type[LakegateError]:
    """The error class for an HTTP status and the gateway's error type (the one table)."""
    if status == 409 and type_ == "TableIdentityMismatch":
        return TableIdentityMismatchError
    if status in _BY_STATUS:
        return _BY_STATUS[status]
    if 400 <= status < 500:
        return InvalidRequestError
    if status >= 500:
        return InternalError
    return LakegateError
