"""The one exception tree of the daemon and its HTTP status table (the class attributes).

This module is a leaf: it knows no transport library. Each surface maps the tree to its own
codes in one table of its own (gRPC: `gateway/surfaces/grpc_errors.py`); the gRPC code each
class gets is shown next to its HTTP status below.

::

    GatewayError                         500 INTERNAL
    ├── CallerError                      400
    │   ├── UnauthenticatedError         401 UNAUTHENTICATED
    │   ├── PermissionDeniedError        403 PERMISSION_DENIED
    │   ├── InvalidRequestError          400 INVALID_ARGUMENT
    │   ├── PayloadTooLargeError         413 INVALID_ARGUMENT
    │   └── RateLimitedCallerError       429 RESOURCE_EXHAUSTED (retry_after_s)
    ├── UpstreamError                    502 UNAVAILABLE
    │   ├── NotFoundError                404 NOT_FOUND
    │   ├── ForbiddenError               403 PERMISSION_DENIED
    │   ├── ConflictError                409 ALREADY_EXISTS
    │   ├── UpstreamBadRequestError      400 INVALID_ARGUMENT (the catalog refused the input)
    │   ├── RateLimitedError             429 RESOURCE_EXHAUSTED (retry_after_s)   retryable
    │   ├── UnavailableError             503 UNAVAILABLE (retry_after_s)          retryable
    │   ├── ProtocolViolationError       502 INTERNAL (the catalog answered nonsense)
    │   ├── UpstreamTimeoutError         504 DEADLINE_EXCEEDED                    retryable
    │   └── UpstreamAuthError            502 UNAVAILABLE (the catalog refused OUR token)
    ├── IdentityProviderError            503 UNAVAILABLE (the IdP refused/failed)  retryable
    ├── CredentialExpiredError           503 UNAVAILABLE (nothing above the serve floor)
    └── TableIdentityMismatchError       409 FAILED_PRECONDITION (not the table the caller expects)

`UpstreamAuthError` is rendered 502, not 401: the caller authenticated fine with the gateway,
it is the gateway's own upstream session that was refused, and a 401 would make clients such
as pylakekeeper believe *their* token is bad.

Upstream errors keep the Lakekeeper envelope `type` (e.g. `NoSuchGenericTableException`) in
`lakekeeper_type`, so the Lakekeeper-compatible surface answers exactly what Lakekeeper said.
Messages never contain secrets: callers build them from names, never from headers or bodies.
"""

from __future__ import annotations

import uuid
from typing import Any, ClassVar


class GatewayError(Exception):
    """Root of every error the daemon raises on purpose."""

    http_status: ClassVar[int] = 500
    error_type: ClassVar[str] = "InternalServerError"
    retryable: ClassVar[bool] = False

    def __init__(
        self,
        message: str,
        *,
        lakekeeper_type: str | None = None,
        retry_after_s: float | None = None,
        status: int | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.lakekeeper_type = lakekeeper_type
        self.retry_after_s = retry_after_s
        self._status = status

    @property
    def type_name(self) -> str:
        """The Lakekeeper envelope `type`: the upstream's own if it sent one."""
        return self.lakekeeper_type or self.error_type

    @property
    def status(self) -> int:
        """The HTTP status to render (an upstream override wins for 4xx pass-through)."""
        return self._status if self._status is not None else self.http_status

    def clone(self) -> GatewayError:
        """A fresh instance with the same class and fields (re-raised from the negative cache,
        so tracebacks of different requests never pile onto one shared object)."""
        return type(self)(
            self.message,
            lakekeeper_type=self.lakekeeper_type,
            retry_after_s=self.retry_after_s,
            status=self._status,
        )

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.message!r}, type={self.type_name!r})"


class CallerError(GatewayError):
    """The local caller's request is wrong or not allowed."""

    http_status = 400
    error_type = "BadRequest"


class UnauthenticatedError(CallerError):
    http_status = 401
    error_type = "Unauthenticated"


class CallerAuthUnavailableError(UnauthenticatedError):
    """The caller's token could not be checked (the JWKS is unreachable or answers garbage):
    not a failure of that token, so no failure limit counts it."""


class PermissionDeniedError(CallerError):
    http_status = 403
    error_type = "PermissionDenied"


class InvalidRequestError(CallerError):
    http_status = 400
    error_type = "BadRequest"


class PayloadTooLargeError(CallerError):
    http_status = 413
    error_type = "PayloadTooLarge"


class RateLimitedCallerError(CallerError):
    http_status = 429
    error_type = "TooManyRequests"


class UpstreamError(GatewayError):
    """The catalog answered with an error or could not be reached."""

    http_status = 502
    error_type = "BadGateway"


class NotFoundError(UpstreamError):
    http_status = 404
    error_type = "NotFound"


class ForbiddenError(UpstreamError):
    http_status = 403
    error_type = "Forbidden"


class ConflictError(UpstreamError):
    http_status = 409
    error_type = "Conflict"


class UpstreamBadRequestError(UpstreamError):
    http_status = 400
    error_type = "BadRequest"


class RateLimitedError(UpstreamError):
    http_status = 429
    error_type = "TooManyRequests"
    retryable = True


class UnavailableError(UpstreamError):
    http_status = 503
    error_type = "ServiceUnavailable"
    retryable = True


class ProtocolViolationError(UpstreamError):
    http_status = 502
    error_type = "BadGateway"


class UpstreamTimeoutError(UpstreamError):
    http_status = 504
    error_type = "GatewayTimeout"
    retryable = True


class UpstreamAuthError(UpstreamError):
    http_status = 502
    error_type = "UpstreamAuthenticationFailed"


class IdentityProviderError(GatewayError):
    http_status = 503
    error_type = "IdentityProviderUnavailable"
    retryable = True


class CredentialExpiredError(GatewayError):
    http_status = 503
    error_type = "CredentialExpired"


class TableIdentityMismatchError(GatewayError):
    """The catalog's table (checked just now) is not the one the caller named by
    `expected_location` / `table_id`: it was dropped, replaced or renamed since the caller
    planned. Retrying does not help; the caller must plan again."""

    http_status = 409
    error_type = "TableIdentityMismatch"


def retry_after_value(err: GatewayError) -> str | None:
    """Whole seconds to wait before retrying, as sent in HTTP `Retry-After` and gRPC `retry-after`.

    Rounded up (at least 1) so a client never comes back before the bucket or upstream is ready;
    None when the error carries no hint.
    """
    if err.retry_after_s is None:
        return None
    return str(max(1, round(err.retry_after_s + 0.499)))


def new_error_id() -> str:
    """A fresh id for the envelope's `stack` (uuid4: unique, not secret)."""
    return str(uuid.uuid4())


def _error_id(request_id: str) -> str:
    # Reuse the request id when it is a UUID, so the id a user quotes is the one in our logs.
    try:
        return str(uuid.UUID(request_id))
    except (ValueError, TypeError, AttributeError):
        return new_error_id()


def envelope(err: GatewayError, request_id: str) -> dict[str, Any]:
    """Render an error as Lakekeeper's envelope (`{"error": {message,type,code,stack}}`).

    Args:
        err: the error to render.
        request_id: the request id; used as the Error ID when it is a UUID.

    Returns:
        The JSON-ready envelope; `code` equals the HTTP status.
    """
    stack = [f"Error ID: {_error_id(request_id)}"]
    return {
        "error": {
            "message": err.message,
            "type": err.type_name,
            "code": err.status,
            "stack": stack,
        }
    }


def internal_envelope(request_id: str) -> dict[str, Any]:
    """The envelope for an unexpected exception: no internals, just ids."""
    return envelope(GatewayError("internal error"), request_id)
