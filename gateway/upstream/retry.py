"""RetryPolicy: a pure backoff schedule (full jitter, Retry-After, overall deadline) + one runner.

Retryable: connection errors, timeouts, 5xx, 429, 503 and `412 ShortTermCredentialError`
(STS throttling) - i.e. errors whose class says `retryable`. A Retry-After longer than what is
left of the deadline ends the retries at once: waiting could only end in a timeout anyway.
"""

from __future__ import annotations

import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TypeVar

from gateway.clock import Clock
from gateway.errors import GatewayError, UpstreamError, UpstreamTimeoutError

T = TypeVar("T")


@dataclass(frozen=True)
class RetryPolicy:
    """How often and how long to retry; every decision is a pure function."""

    max_retries: int = 4
    base_s: float = 0.1
    cap_s: float = 5.0
    deadline_s: float = 30.0

    def backoff_s(self, attempt: int, rand: float) -> float:
        """Full jitter (AWS architecture blog): uniform in [0, min(cap, base * 2**attempt)]."""
        return rand * min(self.cap_s, self.base_s * (2.0**attempt))

    def delay_s(self, attempt: int, err: BaseException, rand: float,
                remaining_s: float) -> float | None:
        """Seconds to wait before attempt `attempt + 1`, or None to give up.

        Args:
            attempt: 0-based index of the attempt that just failed.
            err: its error.
            rand: uniform in [0, 1).
            remaining_s: what is left of the overall deadline.
        """
        # Only catalog errors: the token source has its own backoff for the IdP.
        if not isinstance(err, UpstreamError) or not err.retryable:
            return None
        if attempt >= self.max_retries:
            return None
        if err.retry_after_s is not None:
            delay = max(0.0, err.retry_after_s)
        else:
            delay = self.backoff_s(attempt, rand)
        if delay >= remaining_s:
            return None
        return delay


async def run_with_retry(
    attempt_fn: Callable[[int, float], Awaitable[T]],
    policy: RetryPolicy,
    clock: Clock,
    rng: random.Random,
) -> T:
    """Run `attempt_fn(attempt, remaining_s)` until it succeeds, under `policy`.

    `attempt_fn` receives what is left of the overall deadline, so it can bound its own
    per-attempt timeout by it.

    Raises:
        The last attempt's error, or UpstreamTimeoutError when the deadline ran out.
    """
    deadline = clock.monotonic() + policy.deadline_s
    attempt = 0
    while True:
        remaining = deadline - clock.monotonic()
        if remaining <= 0:
            raise UpstreamTimeoutError("the upstream deadline passed")
        try:
            return await attempt_fn(attempt, remaining)
        except GatewayError as err:
            delay = policy.delay_s(attempt, err, rng.random(), deadline - clock.monotonic())
            if delay is None:
                raise
        await clock.sleep(delay)
        attempt += 1
