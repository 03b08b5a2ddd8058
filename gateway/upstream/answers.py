"""Reading the catalog's answers: status + error envelope to a typed error, `Retry-After`,
the `Date` header, and the checked decoding of success bodies.

Split from `lakekeeper.py` so the one status table and the header parsing read (and are
tested) on their own; `CatalogClient` is their caller in the daemon.
"""

from __future__ import annotations

from collections.abc import Mapping
from email.utils import parsedate_to_datetime
from typing import Any

from pydantic import ValidationError

from gateway.errors import (
    ConflictError,
    ForbiddenError,
    NotFoundError,
    ProtocolViolationError,
    RateLimitedError,
    UnavailableError,
    UpstreamAuthError,
    UpstreamBadRequestError,
    UpstreamError,
    UpstreamTimeoutError,
)
from gateway.models import GenericTable
from gateway.tuning import UPSTREAM_MAX_ERROR_MESSAGE, UPSTREAM_MAX_RETRY_AFTER_S
from gateway.upstream.transport import RawResponse
from gateway.upstream.wire import ErrorEnvelope, WireGenericTable

# status → error class; 5xx not listed map to UnavailableError (retryable).
_STATUS_ERRORS: Mapping[int, type[UpstreamError]] = {
    400: UpstreamBadRequestError,
    401: UpstreamAuthError,
    403: ForbiddenError,
    404: NotFoundError,
    409: ConflictError,
    412: UnavailableError,  # ShortTermCredentialError: STS throttling/failure, retryable
    429: RateLimitedError,
    502: UnavailableError,
    503: UnavailableError,
    504: UpstreamTimeoutError,
}


def parse_retry_after(value: str | None, now_s: float) -> float | None:
    """`Retry-After` as seconds (delta-seconds or HTTP-date), capped; None if absent/bad."""
    if not value:
        return None
    text = value.strip()
    try:
        seconds = float(text)
    except ValueError:
        try:
            seconds = parsedate_to_datetime(text).timestamp() - now_s
        except (TypeError, ValueError, IndexError):
            return None
    if seconds != seconds:  # NaN
        return None
    return min(max(0.0, seconds), UPSTREAM_MAX_RETRY_AFTER_S)


def parse_http_date(value: str | None) -> float | None:
    """An HTTP `Date` header as epoch seconds; None if absent or unreadable."""
    if not value:
        return None
    try:
        parsed = parsedate_to_datetime(value.strip())
    except (TypeError, ValueError, IndexError):
        return None
    if parsed.tzinfo is None:  # RFC 9110 dates are GMT; a naive one is not one of them
        return None
    return parsed.timestamp()


def map_error(resp: RawResponse, op: str, now_s: float) -> UpstreamError:
    """The one translation of a non-success catalog answer into a typed error."""
    lk_type: str | None = None
    message = f"the catalog answered {resp.status} to {op}"
    try:
        env = ErrorEnvelope.model_validate_json(resp.body)
        lk_type = env.error.type or None
        if env.error.message:
            message = env.error.message[:UPSTREAM_MAX_ERROR_MESSAGE]
    except ValidationError:
        pass
    cls = _STATUS_ERRORS.get(resp.status)
    if cls is None:
        cls = UnavailableError if resp.status >= 500 else UpstreamBadRequestError
    retry_after = parse_retry_after(resp.headers.get("retry-after"), now_s)
    # 4xx keep their status on the Lakekeeper surface (e.g. 412 ShortTermCredentialError).
    status = resp.status if 400 <= resp.status < 500 and resp.status != 401 else None
    return cls(message, lakekeeper_type=lk_type, retry_after_s=retry_after, status=status)


def parse_answer(model: Any, resp: RawResponse, op: str) -> Any:
    try:
        return model.model_validate_json(resp.body)
    except ValidationError:
        raise ProtocolViolationError(f"the catalog sent an unreadable answer to {op}") from None


def table_of(wire: WireGenericTable) -> GenericTable:
    return GenericTable(
        name=wire.name, format=wire.format, base_location=wire.base_location,
        protected=wire.protected, doc=wire.doc, properties=dict(wire.properties),
        extra=dict(wire.model_extra or {}),
    )
