"""The gRPC side of the error table: GatewayError class → status code, and the error detail.

`gateway/errors.py` stays free of grpc (cache/ and upstream/ import it); this is the one place
that knows gRPC codes. A class without an entry takes its nearest ancestor's code, so a new
subclass is never left unmapped; anything outside the tree is INTERNAL.
"""

from __future__ import annotations

import grpc

from gateway import errors as e
from lakegate.v1 import common_pb2

GRPC_CODES: dict[type[e.GatewayError], grpc.StatusCode] = {
    e.GatewayError: grpc.StatusCode.INTERNAL,
    e.CallerError: grpc.StatusCode.INVALID_ARGUMENT,
    e.UnauthenticatedError: grpc.StatusCode.UNAUTHENTICATED,
    e.CallerAuthUnavailableError: grpc.StatusCode.UNAUTHENTICATED,
    e.PermissionDeniedError: grpc.StatusCode.PERMISSION_DENIED,
    e.InvalidRequestError: grpc.StatusCode.INVALID_ARGUMENT,
    e.PayloadTooLargeError: grpc.StatusCode.INVALID_ARGUMENT,
    e.RateLimitedCallerError: grpc.StatusCode.RESOURCE_EXHAUSTED,
    e.UpstreamError: grpc.StatusCode.UNAVAILABLE,
    e.NotFoundError: grpc.StatusCode.NOT_FOUND,
    e.ForbiddenError: grpc.StatusCode.PERMISSION_DENIED,
    e.ConflictError: grpc.StatusCode.ALREADY_EXISTS,
    e.UpstreamBadRequestError: grpc.StatusCode.INVALID_ARGUMENT,
    e.RateLimitedError: grpc.StatusCode.RESOURCE_EXHAUSTED,
    e.UnavailableError: grpc.StatusCode.UNAVAILABLE,
    e.ProtocolViolationError: grpc.StatusCode.INTERNAL,
    e.UpstreamTimeoutError: grpc.StatusCode.DEADLINE_EXCEEDED,
    e.UpstreamAuthError: grpc.StatusCode.UNAVAILABLE,
    e.IdentityProviderError: grpc.StatusCode.UNAVAILABLE,
    e.CredentialExpiredError: grpc.StatusCode.UNAVAILABLE,
    e.TableIdentityMismatchError: grpc.StatusCode.FAILED_PRECONDITION,
}


def grpc_code_of(err: BaseException) -> grpc.StatusCode:
    """The status code for `err`: its class's entry, else its nearest mapped ancestor's."""
    for cls in type(err).__mro__:
        code = GRPC_CODES.get(cls)
        if code is not None:
            return code
    return grpc.StatusCode.INTERNAL


def error_detail(err: e.GatewayError, request_id: str) -> bytes:
    """The `lakegate-error-bin` trailer: the same type, message and status as the HTTP envelope."""
    return common_pb2.ErrorDetail(
        type=err.type_name, message=err.message, http_status=err.status, request_id=request_id
    ).SerializeToString()
