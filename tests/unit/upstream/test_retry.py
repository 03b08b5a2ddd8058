import asyncio

import pytest

from gateway.errors import (
    IdentityProviderError,
    NotFoundError,
    RateLimitedError,
    UnavailableError,
    UpstreamTimeoutError,
)
from gateway.upstream.retry import RetryPolicy, run_with_retry
from tests.fakes.clock import FakeClock
from tests.fakes.rng import seeded

POLICY = RetryPolicy(max_retries=4, base_s=0.1, cap_s=5.0, deadline_s=30.0)


@pytest.mark.parametrize(
    ("attempt", "rand", "expected"),
    [(0, 1.0, 0.1), (3, 1.0, 0.8), (10, 1.0, 5.0), (10, 0.5, 2.5), (2, 0.0, 0.0)],
)
def test_full_jitter_backoff_schedule(attempt, rand, expected):
    assert POLICY.backoff_s(attempt, rand) == pytest.approx(expected)


def test_retry_after_overrides_backoff():
    assert POLICY.delay_s(0, RateLimitedError("x", retry_after_s=7), 0.3, 30) == 7


def test_retry_after_beyond_the_deadline_gives_up_at_once():
    assert POLICY.delay_s(0, RateLimitedError("x", retry_after_s=40), 0.3, 30) is None


@pytest.mark.parametrize("err", [NotFoundError("x"), IdentityProviderError("x")])
def test_non_retryable_errors_are_not_retried(err):
    assert POLICY.delay_s(0, err, 0.5, 30) is None


def test_retries_stop_after_max_retries():
    assert POLICY.delay_s(3, UnavailableError("x"), 0.5, 30) is not None
    assert POLICY.delay_s(4, UnavailableError("x"), 0.5, 30) is None


async def test_runner_retries_until_success_and_waits_retry_after():
    clock = FakeClock()
    attempts = []

    async def attempt(n, remaining):
        attempts.append((n, clock.monotonic()))
        if n == 0:
            raise RateLimitedError("slow down", retry_after_s=2.0)
        return "ok"

    run = asyncio.ensure_future(run_with_retry(attempt, POLICY, clock, seeded(1)))
    await clock.settle()
    assert len(attempts) == 1
    await clock.run_for(2.0, step=0.5)
    async with asyncio.timeout(5):
        assert await run == "ok"
    assert attempts[1][1] - attempts[0][1] == pytest.approx(2.0)


async def _always_failing(
    policy: RetryPolicy, error: type[Exception], *, seed: int, run_for_s: float, step_s: float
) -> list[float]:
    """Run the runner over an attempt that always raises `error`, check that `error` comes out,
    and return the time budget (`remaining`) each attempt was given."""
    clock = FakeClock()
    budgets: list[float] = []

    async def attempt(n, remaining):
        budgets.append(remaining)
        raise error("failing")

    run = asyncio.ensure_future(run_with_retry(attempt, policy, clock, seeded(seed)))
    await clock.run_for(run_for_s, step=step_s)
    with pytest.raises(error):
        async with asyncio.timeout(5):
            await run
    return budgets


async def test_runner_raises_the_last_error_when_retries_run_out():
    budgets = await _always_failing(POLICY, UnavailableError, seed=1, run_for_s=20, step_s=0.5)
    assert len(budgets) == 5


async def test_runner_respects_the_overall_deadline():
    policy = RetryPolicy(max_retries=100, base_s=1.0, cap_s=1.0, deadline_s=3.0)
    budgets = await _always_failing(policy, UpstreamTimeoutError, seed=0, run_for_s=10, step_s=0.25)
    assert all(remaining <= 3.0 for remaining in budgets)
    assert 2 <= len(budgets) <= 30
