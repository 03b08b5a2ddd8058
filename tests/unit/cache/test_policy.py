import pytest

from gateway.cache import policy
from gateway.errors import ForbiddenError, NotFoundError, RateLimitedError, UnavailableError

NOW = 1_800_000_000.0


def ms(seconds_from_now: float) -> int:
    return int((NOW + seconds_from_now) * 1000)


@pytest.mark.parametrize(
    ("left_s", "servable", "refresh"),
    [
        (3600, True, False),   # fresh
        (901, True, False),    # just outside the lead
        (899, True, True),     # soft window
        (301, True, True),     # soft window, just above the floor
        (300, False, True),    # at the floor: not served
        (10, False, True),     # hard window
        (-1, False, True),     # expired
    ],
)
def test_windows_table(left_s, servable, refresh):
    assert policy.is_servable(NOW, ms(left_s), 300) is servable
    assert policy.should_refresh(NOW, ms(left_s), 900) is refresh


def test_credential_without_expiry_is_judged_by_ttl_not_windows():
    assert policy.is_servable(NOW, None, 300) is True
    assert policy.should_refresh(NOW, None, 900) is False
    assert policy.remaining_s(NOW, None) is None


@pytest.mark.parametrize(("rand", "lead"), [(0.0, 810.0), (0.5, 900.0), (0.9999999, 990.0)])
def test_jittered_lead_spreads_plus_minus_ten_percent(rand, lead):
    assert policy.jittered_lead(900, 0.1, rand) == pytest.approx(lead, abs=1e-3)


def test_idle_window():
    assert policy.is_idle(2000.0, 199.0, 1800) is True
    assert policy.is_idle(2000.0, 201.0, 1800) is False


@pytest.mark.parametrize(
    ("err", "ttl"),
    [
        (NotFoundError("x"), 5.0),
        (ForbiddenError("x"), 5.0),
        (UnavailableError("x"), None),
        (RateLimitedError("x"), None),
    ],
)
def test_only_deterministic_errors_are_negative_cached(err, ttl):
    assert policy.negative_ttl(err, 5.0) == ttl


def test_negative_cache_can_be_turned_off():
    assert policy.negative_ttl(NotFoundError("x"), 0) is None


def test_retry_backoff_is_capped():
    assert policy.retry_backoff_s(20, 1.0, 60.0, 1.0) == 60.0
    assert policy.retry_backoff_s(1, 1.0, 60.0, 0.5) == 0.5
