"""Cache policy as pure functions of time: nothing here reads a clock or does I/O.

Two windows, as botocore's advisory/mandatory ones:
- soft (`remaining < refresh_lead`, jittered): one background refresh runs, callers keep
  the current value, failures only count;
- hard (`remaining <= min_remaining`, the serve floor): nobody is served the entry, callers
  wait for a fetch and failures propagate.

Clock jumps: a vended epoch-ms expiry is turned into a monotonic deadline once, when the
credential arrives (`expiry_deadline`, judged by up to three clocks: local wall, catalog
`Date`, IdP `Date`); every later decision compares that deadline with monotonic time
(`remaining_until`), so stepping the wall clock changes nothing once cached.
"""

from __future__ import annotations

from gateway.errors import CredentialExpiredError, ForbiddenError, GatewayError, NotFoundError
from gateway.tuning import DATE_RESOLUTION_S, MAX_CLOCK_SKEW_S


def remaining_s(now_s: float, expires_at_ms: int | None) -> float | None:
    """Seconds left at wall time `now_s` (None: the credential carries no expiry)."""
    if expires_at_ms is None:
        return None
    return expires_at_ms / 1000.0 - now_s


def is_servable(now_s: float, expires_at_ms: int | None, floor_s: float) -> bool:
    """Above the serve floor. A credential without expiry is judged by its TTL elsewhere."""
    return above_floor(remaining_s(now_s, expires_at_ms), floor_s)


def above_floor(left_s: float | None, floor_s: float) -> bool:
    """`left_s` (None: no expiry, judged by its TTL elsewhere) is above the serve floor."""
    return left_s is None or left_s > floor_s


def in_soft_window(left_s: float | None, lead_s: float) -> bool:
    """`left_s` is inside the refresh lead (never for a credential without expiry)."""
    return left_s is not None and left_s < lead_s


def remaining_until(now_mono: float, deadline_mono: float | None) -> float | None:
    """Seconds left before a monotonic deadline (None: no expiry)."""
    return None if deadline_mono is None else deadline_mono - now_mono


def expiry_deadline(
    expires_at_ms: int | None,
    *,
    wall_now_s: float,
    mono_now: float,
    server_date_s: float | None = None,
    sent_mono: float | None = None,
    reference_now_s: float | None = None,
    max_skew_s: float = MAX_CLOCK_SKEW_S,
) -> float | None:
    """The monotonic deadline of a credential that arrived at (`wall_now_s`, `mono_now`).

    Up to three estimates of the time left, one per clock: the local wall clock's
    (`expires_at - wall_now`), the catalog's (`expires_at - Date`, counted from `sent_mono`,
    when the request left: the answer was dated after that, so this never overstates) and a
    reference clock's (`reference_now_s`: the IdP's Date carried forward on the monotonic
    clock, an upper bound of its time now). The rule (`agreed_deadline`): the earliest
    deadline wins, unless the two other clocks agree with each other and both say the clock
    behind it is ahead. So no single clock, local or remote, can make an expired credential
    look valid; a clock stepped ahead costs availability only when nobody outvotes it.

    Args:
        expires_at_ms: the vended expiry (None: no expiry, no deadline).
        wall_now_s: local wall time at arrival.
        mono_now: monotonic time at arrival.
        server_date_s: the catalog's `Date` (epoch s), when it sent one.
        sent_mono: monotonic time when the fetch started (default `mono_now`).
        reference_now_s: a third clock's latest possible reading at `mono_now` (epoch s).
        max_skew_s: plausible clock disagreement.
    """
    if expires_at_ms is None:
        return None
    expires_s = expires_at_ms / 1000.0
    deadlines = [mono_now + (expires_s - wall_now_s)]
    if server_date_s is not None:
        start = mono_now if sent_mono is None else min(sent_mono, mono_now)
        deadlines.append(start + (expires_s - server_date_s - DATE_RESOLUTION_S))
    if reference_now_s is not None:
        deadlines.append(mono_now + (expires_s - reference_now_s))
    return agreed_deadline(deadlines, max_skew_s)


def agreed_deadline(deadlines: list[float], max_skew_s: float) -> float:
    """The earliest of the clocks' deadlines, unless it is outvoted.

    The earliest one belongs to the clock that reads latest. It is dropped only when it is
    more than `max_skew_s` before the next one and the two next ones agree within
    `max_skew_s`: two clocks saying that one clock is ahead. Then the earlier of the two
    agreeing ones wins. With two clocks nobody can outvote anybody: the earlier wins.
    """
    ordered = sorted(deadlines)
    if (len(ordered) >= 3 and ordered[1] - ordered[0] > max_skew_s
            and ordered[2] - ordered[1] <= max_skew_s):
        return ordered[1]
    return ordered[0]


def jittered_lead(lead_s: float, jitter: float, rand: float) -> float:
    """`lead_s` spread by ±`jitter` (fraction), `rand` uniform in [0, 1).

    Spreading the refresh point keeps keys fetched together from refreshing together.
    """
    return lead_s * (1.0 + jitter * (2.0 * rand - 1.0))


def should_refresh(now_s: float, expires_at_ms: int | None, lead_s: float) -> bool:
    """In the soft window: refresh in the background (never for a credential without expiry:
    it simply lapses after its short TTL)."""
    return in_soft_window(remaining_s(now_s, expires_at_ms), lead_s)


def is_idle(now_mono: float, last_used_mono: float, idle_s: float) -> bool:
    """Not used within the idle window: neither refreshed nor kept."""
    return now_mono - last_used_mono >= idle_s


def negative_ttl(err: BaseException, ttl_s: float) -> float | None:
    """How long an error may be remembered: deterministic 404/403, and a credential vended
    below the floor (the catalog reuses a credential for half its validity, so asking again
    at once gets the same one); never transient ones."""
    if ttl_s > 0 and isinstance(err, NotFoundError | ForbiddenError | CredentialExpiredError):
        return ttl_s
    return None


def retry_backoff_s(failures: int, base_s: float, cap_s: float, rand: float) -> float:
    """Full-jitter backoff after `failures` consecutive failed background refreshes."""
    return rand * min(cap_s, base_s * (2.0 ** max(0, failures - 1)))


def is_deterministic(err: BaseException) -> bool:
    """An error that a retry will not change (the table is gone or forbidden)."""
    return isinstance(err, GatewayError) and isinstance(err, NotFoundError | ForbiddenError)
