import uuid

import grpc
import pytest

from gateway import errors as e
from gateway.surfaces.grpc_errors import grpc_code_of


@pytest.mark.parametrize(
    ("cls", "status", "code", "retryable"),
    [
        (e.UnauthenticatedError, 401, grpc.StatusCode.UNAUTHENTICATED, False),
        (e.PermissionDeniedError, 403, grpc.StatusCode.PERMISSION_DENIED, False),
        (e.InvalidRequestError, 400, grpc.StatusCode.INVALID_ARGUMENT, False),
        (e.PayloadTooLargeError, 413, grpc.StatusCode.INVALID_ARGUMENT, False),
        (e.RateLimitedCallerError, 429, grpc.StatusCode.RESOURCE_EXHAUSTED, False),
        (e.NotFoundError, 404, grpc.StatusCode.NOT_FOUND, False),
        (e.ForbiddenError, 403, grpc.StatusCode.PERMISSION_DENIED, False),
        (e.ConflictError, 409, grpc.StatusCode.ALREADY_EXISTS, False),
        (e.RateLimitedError, 429, grpc.StatusCode.RESOURCE_EXHAUSTED, True),
        (e.UnavailableError, 503, grpc.StatusCode.UNAVAILABLE, True),
        (e.ProtocolViolationError, 502, grpc.StatusCode.INTERNAL, False),
        (e.UpstreamTimeoutError, 504, grpc.StatusCode.DEADLINE_EXCEEDED, True),
        (e.UpstreamAuthError, 502, grpc.StatusCode.UNAVAILABLE, False),
        (e.IdentityProviderError, 503, grpc.StatusCode.UNAVAILABLE, True),
        (e.CredentialExpiredError, 503, grpc.StatusCode.UNAVAILABLE, False),
    ],
)
def test_error_table(cls, status, code, retryable):
    err = cls("boom")
    assert isinstance(err, e.GatewayError)
    assert (err.status, grpc_code_of(err), err.retryable) == (status, code, retryable)


def test_tree_has_one_root_with_caller_and_upstream_branches():
    assert issubclass(e.PermissionDeniedError, e.CallerError)
    assert issubclass(e.NotFoundError, e.UpstreamError)
    assert not issubclass(e.CredentialExpiredError, e.UpstreamError)


def test_envelope_has_the_lakekeeper_shape_and_preserves_the_upstream_type():
    err = e.NotFoundError("Generic table does not exist",
                          lakekeeper_type="NoSuchGenericTableException")
    rid = str(uuid.uuid4())
    env = e.envelope(err, rid)
    assert env == {"error": {"message": "Generic table does not exist",
                             "type": "NoSuchGenericTableException", "code": 404,
                             "stack": [f"Error ID: {rid}"]}}


def test_envelope_makes_an_error_id_when_the_request_id_is_not_a_uuid():
    env = e.envelope(e.InvalidRequestError("bad"), "req-1")
    assert env["error"]["type"] == "BadRequest"
    assert env["error"]["code"] == 400
    error_id = env["error"]["stack"][0].removeprefix("Error ID: ")
    assert uuid.UUID(error_id)


def test_status_override_keeps_upstream_client_statuses():
    err = e.UnavailableError("Rate exceeded", lakekeeper_type="ShortTermCredentialError",
                             status=412)
    assert e.envelope(err, "r")["error"]["code"] == 412


def test_clone_is_a_new_equal_error():
    err = e.RateLimitedError("slow", lakekeeper_type="X", retry_after_s=3, status=429)
    twin = err.clone()
    assert twin is not err
    assert type(twin) is type(err)
    assert (twin.message, twin.type_name, twin.retry_after_s, twin.status) == ("slow", "X", 3, 429)


def test_internal_envelope_reveals_nothing():
    env = e.internal_envelope("r")
    assert env["error"]["message"] == "internal error"
    assert env["error"]["code"] == 500


@pytest.mark.parametrize(
    ("seconds", "expected"),
    [(None, None), (0.0, "1"), (0.2, "1"), (1.0, "1"), (1.01, "2"), (2.5, "3"), (30.0, "30")],
)
def test_retry_after_value_is_whole_seconds_rounded_up(seconds, expected):
    assert e.retry_after_value(e.RateLimitedError("slow down", retry_after_s=seconds)) == expected
