"""The error tree: one root, builtin bases where callers expect them, readable messages."""

from __future__ import annotations

import lakegate_client
from lakegate_client import (
    GatewayConnectionError,
    GatewayTimeoutError,
    LakegateError,
    NotFoundError,
    RateLimitedError,
)


def test_every_exported_error_derives_from_lakegate_error() -> None:
    errors = [getattr(lakegate_client, n) for n in lakegate_client.__all__ if n.endswith("Error")]
    assert len(errors) >= 13
    assert all(issubclass(e, LakegateError) for e in errors)


def test_transport_errors_are_also_builtin_connection_and_timeout_errors() -> None:
    assert issubclass(GatewayConnectionError, ConnectionError)
    assert issubclass(GatewayTimeoutError, TimeoutError)


def test_message_shows_status_type_and_request_id() -> None:
    error = NotFoundError(
        "table demo_ns.x not found", type="NoSuchGenericTableException", request_id="r-1"
    )
    assert error.status == 404
    assert str(error) == (
        "table demo_ns.x not found (status=404, type=NoSuchGenericTableException, request_id=r-1)"
    )


def test_type_defaults_to_the_class_name_and_status_to_the_class_status() -> None:
    error = RateLimitedError("slow down", retry_after_s=1.5)
    assert (error.type, error.status, error.retry_after_s) == ("RateLimitedError", 429, 1.5)
