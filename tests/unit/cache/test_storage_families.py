"""The cache treats ADLS's and GCS's expiry keys as it treats S3's.

Each family's credential carries only its own expiry key (`s3.session-token-expires-at-ms`,
`adls.sas-token-expires-at-ms.<account>.<host>`, `gcs.oauth2.token-expires-at`; epoch ms as
strings; no `expiration-time`), and every rule is run on each: expiry parsing, refresh-ahead,
the serve floor, never serving an expired credential, the clock rule, and the metrics and
outcomes (what the audit line records) they produce.
"""

from __future__ import annotations

import pytest

from gateway.cache.credential_cache import CredentialCache
from gateway.cache.expiry import parse_expiry_ms
from gateway.errors import CredentialExpiredError, UnavailableError
from gateway.models import AccessMode, CacheKey, Outcome, RequestContext
from gateway.settings import CacheSettings
from tests.fakes.families import FAMILIES, vended
from tests.fakes.fetcher import FakeFetcher
from tests.fakes.rng import seeded

CTX = RequestContext(request_id="req-f")
KEY = CacheKey.of(project=None, warehouse_id="wh", namespace=("ns",), table="t",
                  access=AccessMode.READ)

pytestmark = pytest.mark.parametrize("family", FAMILIES)


@pytest.fixture
def fetcher(clock, family):
    f = FakeFetcher(clock)
    f.family = family
    return f


def make_cache(fetcher, clock, metrics, registry, **settings):
    cfg = CacheSettings(**{"min_remaining_s": 300, "refresh_lead_s": 900, **settings})
    return CredentialCache(fetcher, cfg, clock, metrics, registry.spawn, deadline_s=30,
                           rng=seeded(7))


def counter(metrics, name, **labels):
    return metrics.registry.get_sample_value(name, labels) or 0.0


def test_the_familys_own_key_is_the_expiry(family):
    _, config = vended(family, "t", 1, 1_800_000_000_123)
    assert "expiration-time" not in config
    assert parse_expiry_ms(config) == 1_800_000_000_123
    _, without = vended(family, "t", 1, None)
    assert parse_expiry_ms(without) is None


async def test_a_miss_then_hits_with_the_familys_remaining_lifetime(
    family, fetcher, clock, metrics, registry
):
    cache = make_cache(fetcher, clock, metrics, registry)
    first, outcome, left = await cache.lookup(KEY, CTX)
    assert outcome is Outcome.MISS
    assert left == pytest.approx(3600, abs=1)
    assert first.expires_at_ms == int((clock.true_now() + 3600) * 1000)
    clock.advance(1000)
    again, outcome, left = await cache.lookup(KEY, CTX)
    assert (again, outcome) == (first, Outcome.HIT)
    assert left == pytest.approx(2600, abs=1)
    assert fetcher.calls == 1


async def test_refresh_ahead_replaces_the_entry_in_the_soft_window(
    family, fetcher, clock, metrics, registry
):
    cache = make_cache(fetcher, clock, metrics, registry, idle_s=7200)
    old, _ = await cache.get(KEY, CTX)
    clock.advance(3600 - 600)  # inside the 900 s lead, above the 300 s floor
    due, _ = cache.scan()
    assert due == [KEY]
    assert cache.start_refresh(KEY)
    await registry.drained()
    new, outcome = await cache.get(KEY, CTX)
    assert new is not old
    assert outcome is Outcome.HIT
    assert counter(metrics, "lakegate_refresh_total", reason="ahead", status="ok") == 1


async def test_a_failed_refresh_serves_stale_above_the_floor_only(
    family, fetcher, clock, metrics, registry
):
    cache = make_cache(fetcher, clock, metrics, registry)
    old, _ = await cache.get(KEY, CTX)
    clock.advance(3600 - 600)
    fetcher.errors.append(UnavailableError("catalog 503"))
    cache.start_refresh(KEY)
    await registry.drained()
    value, outcome = await cache.get(KEY, CTX)
    assert (value, outcome) == (old, Outcome.STALE)
    clock.advance(301)  # now 299 s left: below the floor, never served
    fetcher.fail_always = UnavailableError("down")
    with pytest.raises(UnavailableError):
        await cache.get(KEY, CTX)
    assert counter(metrics, "lakegate_evictions_total", reason="expired") == 1


async def test_below_the_floor_is_fetched_again_and_a_short_answer_is_refused(
    family, fetcher, clock, metrics, registry
):
    cache = make_cache(fetcher, clock, metrics, registry)
    old, _ = await cache.get(KEY, CTX)
    clock.advance(3600 - 299)
    value, outcome = await cache.get(KEY, CTX)
    assert value is not old
    assert outcome is Outcome.MISS
    assert value.remaining_s(clock.now()) > 300
    fetcher.lifetime_s = 200  # a catalog vending less than the floor
    clock.advance(3600 - 299)
    with pytest.raises(CredentialExpiredError):
        await cache.get(KEY, CTX)


async def test_an_expired_credential_is_never_served_under_faults(
    family, fetcher, clock, metrics, registry
):
    cache = make_cache(fetcher, clock, metrics, registry)
    await cache.get(KEY, CTX)
    fetcher.fail_always = UnavailableError("down")
    served = []
    for _ in range(80):  # across the whole lifetime and past it
        clock.advance(60)
        try:
            value, _ = await cache.get(KEY, CTX)
            served.append(value.remaining_s(clock.now()))
        except UnavailableError:
            pass
    assert served
    assert min(served) > 300


async def test_the_clock_rule_a_backward_wall_step_never_extends_a_credential(
    family, fetcher, clock, metrics, registry
):
    cache = make_cache(fetcher, clock, metrics, registry)
    first, _ = await cache.get(KEY, CTX)
    clock.step_wall(-3600)  # to the local wall clock, two hours left
    clock.advance(3600 - 299)  # really 299 s left
    value, outcome = await cache.get(KEY, CTX)
    assert value is not first
    assert outcome is Outcome.MISS
    assert value.remaining_s(clock.true_now()) > 300


async def test_the_clock_rule_a_lagging_catalog_never_serves_past_real_expiry(
    family, fetcher, clock, metrics, registry
):
    fetcher.send_date = True
    fetcher.date_offset_s = -600
    cache = make_cache(fetcher, clock, metrics, registry)
    value, _, left = await cache.lookup(KEY, CTX)
    assert left is not None
    assert left <= value.remaining_s(clock.true_now())
