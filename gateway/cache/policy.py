"""Cache policy as pure functions of time: nothing here reads a clock or does I/O.

Two windows, as botocore's advisory/mandatory ones:
- soft (`remaining < refresh_lead`, jittered): one background refresh runs, callers keep
  the current value, failures only count;
- hard (`remaining <= min_remaining`, the serve floor): nobody is served the entry, callers
  wait for a fetch and failures propagate.
"""

from __future__ import annotations

from gateway.errors import ForbiddenError, GatewayError, NotFoundError


def remaining_s(now_s: float, expires_at_ms: int | None) -> float | None:
    """Seconds left at wall time `now_s` (None: the credential carries no expiry)."""
    if expires_at_ms is None:
        return None
    return expires_at_ms / 1000.0 - now_s


def is_servable(now_s: float, expires_at_ms: int | None, floor_s: float) -> bool:
    """Above the serve floor. A credential without expiry is judged by its TTL elsewhere."""
    left = remaining_s(now_s, expires_at_ms)
    return left is None or left > floor_s


def jittered_lead(lead_s: float, jitter: float, rand: float) -> float:
    """`lead_s` spread by ±`jitter` (fraction), `rand` uniform in [0, 1).

    Spreading the refresh point keeps keys fetched together from refreshing together.
    """
    return lead_s * (1.0 + jitter * (2.0 * rand - 1.0))


def should_refresh(now_s: float, expires_at_ms: int | None, lead_s: float) -> bool:
    """In the soft window: refresh in the background (never for a credential without expiry:
    it simply lapses after its short TTL)."""
    left = remaining_s(now_s, expires_at_ms)
    return left is not None and left < lead_s


def is_idle(now_mono: float, last_used_mono: float, idle_s: float) -> bool:
    """Not used within the idle window: neither refreshed nor kept."""
    return now_mono - last_used_mono >= idle_s


def negative_ttl(err: BaseException, ttl_s: float) -> float | None:
    """How long an error may be remembered: only deterministic 404/403, never transient ones."""
    if ttl_s > 0 and isinstance(err, NotFoundError | ForbiddenError):
        return ttl_s
    return None


def retry_backoff_s(failures: int, base_s: float, cap_s: float, rand: float) -> float:
    """Full-jitter backoff after `failures` consecutive failed background refreshes."""
    return rand * min(cap_s, base_s * (2.0 ** max(0, failures - 1)))


def is_deterministic(err: BaseException) -> bool:
    """An error that a retry will not change (the table is gone or forbidden)."""
    return isinstance(err, GatewayError) and isinstance(err, NotFoundError | ForbiddenError)
