"""One credential cache entry: the cached value and the bookkeeping of its refreshes."""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

from gateway.cache import policy
from gateway.models import CredentialSet
from gateway.tuning import REFRESH_RETRY_BASE_S, REFRESH_RETRY_CAP_S


class Fetched(NamedTuple):
    """A flight's answer: the value and its monotonic expiry deadline (None: no expiry)."""

    value: CredentialSet
    deadline_mono: float | None


@dataclass
class Entry:
    """One cached credential set; mutable bookkeeping, immutable value."""

    value: CredentialSet
    deadline_mono: float | None  # the vended expiry on the monotonic clock (None: no expiry)
    fetched_mono: float
    last_used_mono: float
    lead_s: float  # refresh_lead with this entry's jitter, drawn once per fetch
    ttl_deadline_mono: float | None  # only for sets without an expiry
    stale: bool = False  # the last background refresh failed
    for_request: bool = False  # stored by a fetch a caller waited for (not in the background)
    failures: int = 0
    next_attempt_mono: float = 0.0

    def back_off(self, failures: int, now_mono: float, rand: float) -> None:
        """No background refresh before a full-jitter backoff after `failures` failed (or
        unchanged) refreshes; `rand` uniform in [0, 1)."""
        self.failures = failures
        self.next_attempt_mono = now_mono + policy.retry_backoff_s(
            failures, REFRESH_RETRY_BASE_S, REFRESH_RETRY_CAP_S, 0.5 + 0.5 * rand,
        )

    def renewable(self, now_mono: float, min_left_s: float) -> bool:
        """A refresh now could leave more than `min_left_s` (the entry was issued for longer)
        and no backoff holds."""
        return (self.deadline_mono is not None
                and self.deadline_mono - self.fetched_mono > min_left_s
                and now_mono >= self.next_attempt_mono)
