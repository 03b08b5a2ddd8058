import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

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


WALL = 1_800_000_000.0
MONO = 10_000.0
EXPIRES_MS = int((WALL + 3600) * 1000)


def test_without_a_date_the_deadline_follows_the_local_wall_clock():
    assert policy.expiry_deadline(EXPIRES_MS, wall_now_s=WALL, mono_now=MONO) == MONO + 3600
    assert policy.expiry_deadline(None, wall_now_s=WALL, mono_now=MONO,
                                  server_date_s=WALL) is None


def test_with_agreeing_clocks_the_smaller_estimate_wins():
    deadline = policy.expiry_deadline(EXPIRES_MS, wall_now_s=WALL + 0.4, mono_now=MONO,
                                      server_date_s=WALL, sent_mono=MONO - 0.2)
    assert deadline == pytest.approx(MONO - 0.2 + 3600 - 1.0)  # Date is whole seconds


def test_a_local_clock_behind_the_catalog_cannot_lengthen_a_credential():
    deadline = policy.expiry_deadline(EXPIRES_MS, wall_now_s=WALL - 3600, mono_now=MONO,
                                      server_date_s=WALL)
    assert deadline == pytest.approx(MONO + 3600 - 1.0)


def test_a_local_clock_stepped_ahead_is_overruled_when_the_catalog_and_the_idp_agree():
    deadline = policy.expiry_deadline(EXPIRES_MS, wall_now_s=WALL + 3600, mono_now=MONO,
                                      server_date_s=WALL, reference_now_s=WALL + 1.0)
    assert deadline == pytest.approx(MONO + 3600 - 1.0)


def test_the_catalog_alone_cannot_overrule_a_local_clock_that_reads_later():
    # Two clocks: nobody can tell which one is wrong, so the earlier deadline wins (safe).
    deadline = policy.expiry_deadline(EXPIRES_MS, wall_now_s=WALL + 3600, mono_now=MONO,
                                      server_date_s=WALL)
    assert deadline == pytest.approx(MONO)


@pytest.mark.parametrize("lag_s", [120, 600, 3600])
@pytest.mark.parametrize("with_idp", [False, True])
def test_a_lagging_catalog_date_never_lengthens_a_credential(lag_s, with_idp):
    # The defect: with the catalog 120 s / 600 s behind, the deadline moved later by the lag.
    deadline = policy.expiry_deadline(
        EXPIRES_MS, wall_now_s=WALL, mono_now=MONO, server_date_s=WALL - lag_s,
        reference_now_s=WALL + 1.0 if with_idp else None,
    )
    assert deadline is not None
    assert deadline <= MONO + 3600


def test_a_catalog_date_ahead_is_outvoted_by_the_local_clock_and_the_idp():
    deadline = policy.expiry_deadline(EXPIRES_MS, wall_now_s=WALL, mono_now=MONO,
                                      server_date_s=WALL + 600, reference_now_s=WALL + 1.0)
    assert deadline == pytest.approx(MONO + 3600 - 1.0)


def test_a_catalog_date_ahead_without_a_third_clock_shortens_but_never_lengthens():
    deadline = policy.expiry_deadline(EXPIRES_MS, wall_now_s=WALL, mono_now=MONO,
                                      server_date_s=WALL + 600)
    assert deadline == pytest.approx(MONO + 3600 - 601.0)


def test_an_idp_clock_ahead_is_outvoted_and_one_behind_changes_nothing():
    ahead = policy.expiry_deadline(EXPIRES_MS, wall_now_s=WALL, mono_now=MONO,
                                   server_date_s=WALL, reference_now_s=WALL + 900)
    behind = policy.expiry_deadline(EXPIRES_MS, wall_now_s=WALL, mono_now=MONO,
                                    server_date_s=WALL, reference_now_s=WALL - 900)
    assert ahead == pytest.approx(MONO + 3600 - 1.0)
    assert behind == pytest.approx(MONO + 3600 - 1.0)


def test_three_clocks_that_all_disagree_give_the_earliest_deadline():
    deadline = policy.expiry_deadline(EXPIRES_MS, wall_now_s=WALL + 1200, mono_now=MONO,
                                      server_date_s=WALL, reference_now_s=WALL + 600)
    assert deadline == pytest.approx(MONO + 3600 - 1200)


@settings(max_examples=300, deadline=None, derandomize=True)
@given(which=st.sampled_from(["local", "catalog", "idp"]),
       offset=st.floats(min_value=-7200, max_value=7200, allow_nan=False),
       latency=st.floats(min_value=0, max_value=5))
def test_no_single_wrong_clock_makes_a_credential_outlive_its_expiry(which, offset, latency):
    """Real time at arrival is WALL; the request left `latency` s before. One clock is off by
    `offset`; the deadline is never later than the real expiry, and when the wrong clock is
    outvoted (the two others agree) it is within the Date resolution and latency of it."""
    date = float(int(WALL - latency / 2 + (offset if which == "catalog" else 0)))
    deadline = policy.expiry_deadline(
        EXPIRES_MS, wall_now_s=WALL + (offset if which == "local" else 0), mono_now=MONO,
        server_date_s=date, sent_mono=MONO - latency,
        reference_now_s=WALL + 1.0 + (offset if which == "idp" else 0),
    )
    assert deadline is not None
    assert deadline <= MONO + 3600 + 1e-6
    if abs(offset) > policy.MAX_CLOCK_SKEW_S + latency + 2:
        assert deadline >= MONO + 3600 - latency - 2.0


def test_a_small_local_lead_is_plausible_skew_and_still_counts():
    deadline = policy.expiry_deadline(EXPIRES_MS, wall_now_s=WALL + 30, mono_now=MONO,
                                      server_date_s=WALL)
    assert deadline == pytest.approx(MONO + 3600 - 30)


def test_deadline_windows():
    assert policy.remaining_until(MONO, MONO + 301) == 301
    assert policy.remaining_until(MONO, None) is None
    assert policy.above_floor(301, 300)
    assert not policy.above_floor(300, 300)
    assert policy.above_floor(None, 300)
    assert policy.in_soft_window(899, 900)
    assert not policy.in_soft_window(None, 900)
