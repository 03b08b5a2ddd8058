"""All Prometheus metrics of the daemon, built against an injected registry (no globals).

Names and labels are a contract (docs/contracts.md §6): counters are declared without `_total`
(the client library appends it). Labels are low-cardinality only: never a table, token or id.
"""

from __future__ import annotations

from bisect import bisect_left
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, Info, ProcessCollector

from gateway import __version__

_LATENCY_BUCKETS = (
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
)
_REMAINING_BUCKETS = (60, 120, 300, 600, 900, 1200, 1800, 2700, 3600, 7200, 21600, 43200)

# Label values known up front. Their series are created at zero when the Metrics object is built,
# so an alert or a ratio over them (deploy/monitoring) sees 0 from start-up, never an absent
# series. Kept in step with the code that counts them by tests/unit/test_metrics.py.
SURFACES = ("http", "grpc", "rest", "aws")
CREDENTIAL_RESULTS = ("hit", "miss", "coalesced", "stale", "denied", "not_found", "error")
UPSTREAM_CALLS = (("catalog", "load_credentials"), ("idp", "token"))
UPSTREAM_STATUSES = ("200", "error")  # "error": no HTTP answer (connection failed)
EVICTION_REASONS = ("lru", "idle", "expired", "invalidated")
REFRESH_REASONS = ("ahead", "lazy")
REFRESH_STATUSES = ("ok", "error")
INGRESS_REASONS = ("ssrf_header", "auth", "ratelimit", "policy", "malformed", "project",
                   "auth_ratelimit")
RELOAD_RESULTS = ("ok", "error")
SKEW_CLOCKS = ("catalog", "idp")  # remote clocks whose `Date` the gateway compares with its own
# Table identity checks (gateway/cache/identity.py), per metadata load: loaded, not_modified
# (304), error (the cached entry was served, retried soon); and per cache key: changed (the
# cached table was replaced, the entry refetched).
IDENTITY_RESULTS = ("loaded", "not_modified", "error", "changed")
# Change events (service/change_events.py) by result: applied, ignored (commits, views), and the
# ones not applied: malformed, refused (over a limit), rate_limited, dropped (by the client).
CHANGE_EVENT_RESULTS = ("applied", "ignored", "malformed", "refused", "rate_limited", "dropped")


class Metrics:
    """The one metrics object, built by the App and passed down to every layer."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry if registry is not None else CollectorRegistry(auto_describe=True)
        r = self.registry
        self.requests = Counter(
            "lakegate_requests", "Requests served, by surface, kind and cache result.",
            ["surface", "kind", "result"], registry=r,
        )
        self.request_duration = Histogram(
            "lakegate_request_duration_seconds", "Request latency seen by the gateway.",
            ["surface", "kind"], buckets=_LATENCY_BUCKETS, registry=r,
        )
        self.upstream_requests = Counter(
            "lakegate_upstream_requests", "Requests sent to the catalog or the IdP (per attempt).",
            ["target", "op", "status"], registry=r,
        )
        self.upstream_duration = Histogram(
            "lakegate_upstream_request_duration_seconds", "Upstream request latency per attempt.",
            ["target", "op"], buckets=_LATENCY_BUCKETS, registry=r,
        )
        self.cache_entries = Gauge(
            "lakegate_cache_entries", "Credential cache entries.", registry=r,
        )
        self.evictions = Counter(
            "lakegate_evictions", "Cache evictions by reason (lru|idle|expired|invalidated).",
            ["reason"], registry=r,
        )
        self.refresh = Counter(
            "lakegate_refresh", "Credential refreshes by reason (ahead|lazy) and status.",
            ["reason", "status"], registry=r,
        )
        self.refresh_queue_depth = Gauge(
            "lakegate_refresh_queue_depth", "Keys waiting in the refresh-ahead queue.", registry=r,
        )
        self.served_remaining = Histogram(
            "lakegate_served_remaining_seconds", "Remaining lifetime of served credentials.",
            buckets=_REMAINING_BUCKETS, registry=r,
        )
        self.idp_token_expiry = Gauge(
            "lakegate_idp_token_expiry_timestamp_seconds",
            "Expiry (epoch s) of the gateway's current upstream token.", registry=r,
        )
        self.singleflight_waiters = Gauge(
            "lakegate_singleflight_waiters", "Callers waiting on a shared upstream fetch.",
            registry=r,
        )
        self.stale_serving = Gauge(
            "lakegate_stale_serving",
            "Entries whose last refresh failed and that are served stale above the floor.",
            registry=r,
        )
        self.sign_requests = Counter(
            "lakegate_sign_requests", "S3 sign requests, by mode (local|forwarded|refused).",
            ["mode"], registry=r,
        )
        self.ingress_rejected = Counter(
            "lakegate_ingress_rejected", "Requests refused before the service, by reason.",
            ["reason"], registry=r,
        )
        self.config_reloads = Counter(
            "lakegate_config_reloads",
            "SIGHUP reloads of caller tokens, policy and log level, by result (ok, error).",
            ["result"], registry=r,
        )
        self.idp_token_expired_on_arrival = Counter(
            "lakegate_idp_token_expired_on_arrival",
            "IdP tokens whose lifetime was under the refresh floor when they arrived.",
            registry=r,
        )
        self.clock_skew = Gauge(
            "lakegate_clock_skew_seconds",
            "A remote clock (its HTTP Date) minus the local wall clock, by clock (catalog, idp).",
            ["clock"], registry=r,
        )
        self.identity_checks = Counter(
            "lakegate_identity_checks",
            "Table identity checks: metadata loads (loaded, not_modified, error) and "
            "replaced tables found (changed).", ["result"], registry=r,
        )
        self.identity_mismatches = Counter(
            "lakegate_identity_mismatches",
            "Requests refused because the catalog's table is not the caller's expected one.",
            registry=r,
        )
        self.change_events_configured = Gauge(
            "lakegate_change_events_configured",
            "1 when the gateway is set to subscribe to the catalog's change events (NATS).",
            registry=r,
        )
        self.change_events_up = Gauge(
            "lakegate_change_events_up",
            "1 while the change events subscription is up (0: lost or not configured).",
            registry=r,
        )
        self.change_events = Counter(
            "lakegate_change_events",
            "Change events received, by result (applied, ignored, malformed; refused: over a "
            "size, depth or name limit; rate_limited: over one table's rate; dropped: by the "
            "NATS client, the consumer fell behind).", ["result"],
            registry=r,
        )
        # process_cpu_seconds_total, process_resident_memory_bytes, open fds, start time.
        ProcessCollector(registry=r)
        self.build_info = Info("lakegate_build", "Build information.", registry=r)
        self.build_info.info({"version": __version__})
        self._create_known_series()

    def _create_known_series(self) -> None:
        """Every labelled series the dashboards and alerts select, at zero (see SURFACES)."""
        for surface in SURFACES:
            self.request_duration.labels(surface, "credential")
            for result in CREDENTIAL_RESULTS:
                self.requests.labels(surface, "credential", result)
        for target, op in UPSTREAM_CALLS:
            for status in UPSTREAM_STATUSES:
                self.upstream_requests.labels(target, op, status)
            self.upstream_duration.labels(target, op)
        for reason in EVICTION_REASONS:
            self.evictions.labels(reason)
        for reason in REFRESH_REASONS:
            for status in REFRESH_STATUSES:
                self.refresh.labels(reason, status)
        for reason in INGRESS_REASONS:
            self.ingress_rejected.labels(reason)
        for result in RELOAD_RESULTS:
            self.config_reloads.labels(result)
        for clock in SKEW_CLOCKS:
            self.clock_skew.labels(clock)
        for result in IDENTITY_RESULTS:
            self.identity_checks.labels(result)
        for result in CHANGE_EVENT_RESULTS:
            self.change_events.labels(result)


class LoopValue:
    """A metric value written from the event loop's thread only: no lock.

    prometheus_client's MutexValue takes a threading.Lock on every `inc`; a histogram
    observation is two of them, and the request accounting makes two observations per request
    (3-4 % of a cached HTTP answer's CPU in the py-spy profiles of the bench). The request
    histograms are only written by the surfaces, on the loop; a scrape reads them with `get`
    (one attribute read, atomic under the GIL). Same interface as MutexValue.
    """

    __slots__ = ("_exemplar", "_value")

    def __init__(self, value: float = 0.0) -> None:
        self._value = value
        self._exemplar: Any = None

    def inc(self, amount: float) -> None:
        self._value += amount

    def set(self, value: float, timestamp: float | None = None) -> None:
        self._value = value

    def set_exemplar(self, exemplar: Any) -> None:
        self._exemplar = exemplar

    def get(self) -> float:
        return self._value

    def get_exemplar(self) -> Any:
        return self._exemplar


def loop_counter(child: Any) -> Any:
    """An `inc(amount)` for one counter (or label child) written on the loop's thread only:
    its value becomes a `LoopValue` (keeping what it held), so an increment takes no lock.
    Falls back to the child itself if its internals are not as expected."""
    value = getattr(child, "_value", None)
    if value is None or not hasattr(value, "get"):
        return child
    child._value = as_loop_value(value)
    return child._value


def as_loop_value(value: Any) -> LoopValue:
    """`value` itself if it is a LoopValue, else a LoopValue holding what it held."""
    return value if isinstance(value, LoopValue) else LoopValue(value.get())


class BucketObserver:
    """`observe()` for one histogram (or label child) with a binary search for the bucket.

    prometheus_client's Histogram.observe walks the bucket bounds one by one, each step in
    Python; the request accounting observes two histograms per request. The effect is the same:
    the sum grows by the amount and the first bucket whose bound is >= the amount counts one
    (none for NaN). Falls back to the library's observe if its internals are not as expected.

    Wrapping a histogram makes its values `LoopValue`s (keeping what they held, shared by every
    observer of that histogram): only wrap histograms written from the event loop's thread.
    """

    __slots__ = ("_bounds", "_buckets", "_histogram", "_sum")

    def __init__(self, histogram: Histogram) -> None:
        self._histogram = histogram
        bounds = getattr(histogram, "_upper_bounds", None)
        buckets = getattr(histogram, "_buckets", None)
        total = getattr(histogram, "_sum", None)
        usable = (bounds is not None and buckets is not None and total is not None
                  and len(bounds) == len(buckets) and list(bounds) == sorted(bounds))
        self._bounds: list[float] | None = list(bounds) if usable else None  # type: ignore[arg-type]
        if usable:
            if not isinstance(total, LoopValue):
                total = histogram._sum = as_loop_value(total)
            if not all(isinstance(b, LoopValue) for b in buckets):  # type: ignore[union-attr]
                buckets = [as_loop_value(b) for b in buckets]  # type: ignore[union-attr]
                histogram._buckets = buckets
        self._buckets = buckets
        self._sum = total

    def observe(self, amount: float) -> None:
        bounds = self._bounds
        if bounds is None:
            self._histogram.observe(amount)
            return
        # LoopValues (made so in __init__), incremented in place: two method calls less per
        # observation, on the request accounting's path.
        self._sum._value += amount  # type: ignore[union-attr]
        if amount == amount:  # not NaN (NaN is in no bucket, as in Histogram.observe)
            i = bisect_left(bounds, amount)
            if i < len(bounds):
                self._buckets[i]._value += 1  # type: ignore[index]
