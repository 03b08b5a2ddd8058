import math
import re
from pathlib import Path

import pytest
from prometheus_client import generate_latest

from gateway import __version__
from gateway.metrics import Metrics

CONTRACT = {
    "lakegate_requests_total": {"surface", "kind", "result"},
    "lakegate_request_duration_seconds_count": {"surface", "kind"},
    "lakegate_upstream_requests_total": {"target", "op", "status"},
    "lakegate_upstream_request_duration_seconds_count": {"target", "op"},
    "lakegate_cache_entries": set(),
    "lakegate_evictions_total": {"reason"},
    "lakegate_refresh_total": {"reason", "status"},
    "lakegate_refresh_queue_depth": set(),
    "lakegate_served_remaining_seconds_count": set(),
    "lakegate_idp_token_expiry_timestamp_seconds": set(),
    "lakegate_singleflight_waiters": set(),
    "lakegate_stale_serving": set(),
    "lakegate_ingress_rejected_total": {"reason"},
    "lakegate_build_info": {"version"},
}


def exercise(m: Metrics) -> None:
    m.requests.labels(surface="http", kind="credential", result="hit").inc()
    m.request_duration.labels(surface="http", kind="credential").observe(0.001)
    m.upstream_requests.labels(target="catalog", op="load_credentials", status="200").inc()
    m.upstream_duration.labels(target="catalog", op="load_credentials").observe(0.01)
    m.evictions.labels(reason="lru").inc()
    m.refresh.labels(reason="ahead", status="ok").inc()
    m.served_remaining.observe(1800)
    m.ingress_rejected.labels(reason="forgeable").inc()


def test_exposed_names_and_labels_match_the_contract():
    m = Metrics()
    exercise(m)
    seen = {}
    for family in m.registry.collect():
        for sample in family.samples:
            seen.setdefault(sample.name, set()).update(sample.labels)
    for name, labels in CONTRACT.items():
        assert name in seen, name
        assert seen[name] == labels, name
    assert m.registry.get_sample_value("lakegate_build_info", {"version": __version__}) == 1


def test_each_metrics_object_has_its_own_registry():
    a, b = Metrics(), Metrics()
    a.requests.labels(surface="grpc", kind="metadata", result="miss").inc()
    labels = {"surface": "grpc", "kind": "metadata", "result": "miss"}
    assert a.registry.get_sample_value("lakegate_requests_total", labels) == 1
    assert b.registry.get_sample_value("lakegate_requests_total", labels) is None
    assert b'kind="metadata"' not in generate_latest(b.registry)
    credential_miss = {"surface": "grpc", "kind": "credential", "result": "miss"}
    a.requests.labels(**credential_miss).inc(2)
    assert a.registry.get_sample_value("lakegate_requests_total", credential_miss) == 2
    assert b.registry.get_sample_value("lakegate_requests_total", credential_miss) == 0


def test_known_label_values_are_the_ones_the_code_counts():
    """The series created at zero use the label values the counting code uses."""
    from typing import get_args

    from gateway import metrics
    from gateway.errors import NotFoundError
    from gateway.models import Outcome
    from gateway.surfaces.accounting import Surface, result_for

    assert set(metrics.SURFACES) == set(get_args(Surface))
    failed = result_for(ValueError())  # not a caller refusal: the generic failure label
    absent = result_for(NotFoundError("no such table"))
    assert set(metrics.CREDENTIAL_RESULTS) == (
        {o.value for o in Outcome} | {"denied", absent, failed})
    source = Path(metrics.__file__).parents[0]
    counted = {
        "ingress": _labels_in(source / "surfaces/ingress.py", r'_reject\(\s*"([a-z_]+)"')
        | _labels_in(source / "app.py", r'ingress_rejected\.labels\("([a-z_]+)"\)'),
        "evictions": _labels_in(source / "cache/credential_cache.py",
                                r'(?:_drop|_count_drop)\([^"]*"([a-z_]+)"'),
        "refresh": _labels_in(source / "cache/credential_cache.py", r'reason = "([a-z_]+)"')
        | _labels_in(source / "cache/credential_cache.py", r'ctx, "([a-z_]+)", self\._tickets'),
    }
    assert counted["ingress"] == set(metrics.INGRESS_REASONS)
    assert counted["evictions"] == set(metrics.EVICTION_REASONS)
    assert counted["refresh"] - {"miss"} == set(metrics.REFRESH_REASONS)


def _labels_in(path: Path, pattern: str) -> set[str]:
    return set(re.findall(pattern, path.read_text()))


def test_known_series_exist_at_zero_before_anything_is_counted():
    m = Metrics()
    value = m.registry.get_sample_value
    for surface in ("http", "grpc", "rest", "aws"):
        for result in ("hit", "miss", "coalesced", "stale", "denied", "not_found", "error"):
            labels = {"surface": surface, "kind": "credential", "result": result}
            assert value("lakegate_requests_total", labels) == 0, labels
    for target, op in (("catalog", "load_credentials"), ("idp", "token")):
        for status in ("200", "error"):
            labels = {"target": target, "op": op, "status": status}
            assert value("lakegate_upstream_requests_total", labels) == 0
    assert value("lakegate_refresh_total", {"reason": "ahead", "status": "error"}) == 0
    assert value("lakegate_evictions_total", {"reason": "lru"}) == 0
    assert value("lakegate_ingress_rejected_total", {"reason": "policy"}) == 0
    assert value("lakegate_config_reloads_total", {"result": "error"}) == 0


def _histogram_samples(registry: object, name: str) -> list[tuple[str, str | None, float]]:
    metric = next(m for m in registry.collect() if m.name == name)  # type: ignore[attr-defined]
    return [(s.name.replace(name, ""), s.labels.get("le"), s.value) for s in metric.samples
            if not s.name.endswith("_created")]


@pytest.mark.parametrize("with_nan", [False, True])
def test_bucket_observer_counts_exactly_like_histogram_observe(with_nan: bool) -> None:
    from prometheus_client import CollectorRegistry, Histogram

    from gateway.metrics import BucketObserver

    values = [0.0, 0.0005, 0.00051, 0.3, 1.0, 29.9, 30.0, 31.0, 1e9, -1.0, float("inf")]
    if with_nan:
        values.insert(3, float("nan"))
    registry = CollectorRegistry()
    buckets = (0.0005, 0.001, 0.25, 1.0, 30.0)
    plain = Histogram("plain", "h", ["k"], buckets=buckets, registry=registry)
    fast = Histogram("fast", "h", ["k"], buckets=buckets, registry=registry)
    observer = BucketObserver(fast.labels("x"))
    for v in values:
        plain.labels("x").observe(v)
        observer.observe(v)
    got, want = _histogram_samples(registry, "fast"), _histogram_samples(registry, "plain")
    assert len(got) == len(buckets) + 3  # finite buckets, +Inf, count, sum
    assert got[:-1] == want[:-1]  # every bucket and the count
    if with_nan:
        assert math.isnan(got[-1][2])
        assert math.isnan(want[-1][2])
    else:
        assert got[-1] == want[-1]


def test_bucket_observers_of_one_histogram_share_its_lock_free_values() -> None:
    from prometheus_client import CollectorRegistry, Histogram

    from gateway.metrics import BucketObserver, LoopValue

    registry = CollectorRegistry()
    hist = Histogram("shared", "h", buckets=(1.0, 5.0), registry=registry)
    hist.observe(0.5)  # observed before any observer wraps it: kept
    first, second = BucketObserver(hist), BucketObserver(hist)
    first.observe(2.0)
    second.observe(3.0)
    hist.observe(7.0)  # the library's own observe still counts
    got = {(name, le): value for name, le, value in _histogram_samples(registry, "shared")}
    assert got[("_bucket", "1.0")] == 1.0
    assert got[("_bucket", "5.0")] == 3.0
    assert got[("_bucket", "+Inf")] == 4.0
    assert got[("_count", None)] == 4.0
    assert got[("_sum", None)] == 12.5
    # the hot path takes no lock: the values are the loop-thread kind
    assert isinstance(hist._sum, LoopValue)
    assert all(isinstance(b, LoopValue) for b in hist._buckets)


def test_loop_counter_keeps_the_count_and_takes_no_lock() -> None:
    from prometheus_client import CollectorRegistry, Counter

    from gateway.metrics import LoopValue, loop_counter

    registry = CollectorRegistry()
    counter = Counter("hits", "h", ["result"], registry=registry)
    child = counter.labels("hit")
    child.inc(2)  # counted before the swap: kept
    inc = loop_counter(child)
    assert isinstance(inc, LoopValue)
    assert loop_counter(counter.labels("hit")) is inc  # one value per series
    inc.inc(1.0)
    child.inc()  # the library's own inc still counts, into the same value
    assert registry.get_sample_value("hits_total", {"result": "hit"}) == 4.0
    assert loop_counter(object()) is not None  # no internals: the object itself
