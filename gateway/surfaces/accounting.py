"""Per-request accounting: every surface request is counted exactly once.

`lakegate_requests_total{surface,kind,result}` must equal the truth exactly in deterministic tests,
so the count happens in one place, on the way out of the request, whatever path it took:
the cache outcome on success (hit|miss|coalesced|stale), `denied` when the caller was refused
(auth, policy, rate limit, forgeable request), `not_found` when the catalog answered that the table
or warehouse does not exist (a job probing for a table it is about to create asks exactly this: an
answer, not a fault), `error` for everything else (bad input, upstream errors, cancellation).
"""

from __future__ import annotations

from types import TracebackType
from typing import Any, Literal

from gateway.clock import Clock
from gateway.errors import (
    NotFoundError,
    PermissionDeniedError,
    RateLimitedCallerError,
    UnauthenticatedError,
)
from gateway.metrics import BucketObserver, Metrics, loop_counter
from gateway.models import Outcome

Surface = Literal["http", "grpc", "rest", "aws"]
Kind = Literal["credential", "metadata", "admin"]

_DENIED = (UnauthenticatedError, PermissionDeniedError, RateLimitedCallerError)


def result_for(exc: BaseException) -> str:
    """The `result` label of a failed request."""
    if isinstance(exc, _DENIED):
        return "denied"
    return "not_found" if isinstance(exc, NotFoundError) else "error"


def result_for_status(status: int) -> str:
    """The `result` label of a catalog answer >= 400 passed through as is: the rule of
    `result_for` for the error that status maps to (404: `not_found`, the rest `error`)."""
    return "not_found" if status == 404 else "error"


class _Track:
    """The metric children of one (surface, kind), bound once: `labels()` takes a lock and a
    dict lookup per call, measurable on the cached-credential hot path."""

    __slots__ = ("counters", "duration", "kind", "metrics", "remaining", "surface")

    def __init__(self, metrics: Metrics, surface: str, kind: str) -> None:
        self.metrics = metrics
        self.remaining = BucketObserver(metrics.served_remaining)
        self.surface = surface
        self.kind = kind
        self.duration = BucketObserver(metrics.request_duration.labels(surface, kind))
        # Bound on first use; the credential series already exist at 0 (Metrics creates them).
        self.counters: dict[str, Any] = {}

    def counter(self, result: str) -> Any:
        """The series' `inc(amount)`, lock-free (metrics.loop_counter: surfaces run on the
        loop)."""
        inc = self.counters.get(result)
        if inc is None:
            inc = self.counters[result] = loop_counter(self.metrics.requests.labels(
                self.surface, self.kind, result))
        return inc


class Tally:
    """One request in flight; `served()` sets the success result before the context exits."""

    __slots__ = ("_clock", "_remaining_s", "_result", "_started", "_track")

    def __init__(self, track: _Track, clock: Clock) -> None:
        self._track = track
        self._clock = clock
        self._result: str | None = None
        self._remaining_s: float | None = None
        self._started = 0.0

    def served(self, outcome: Outcome | str, remaining_s: float | None = None) -> None:
        """Record the success result (the cache outcome, or `miss`/`hit` for metadata)."""
        self._result = outcome  # a StrEnum member is its str (no str() call per request)
        self._remaining_s = remaining_s

    def __enter__(self) -> Tally:
        self._started = self._clock.monotonic()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        track = self._track
        if exc is not None:
            result = result_for(exc)
        else:
            # Metadata calls that went upstream and did not name an outcome count as a miss.
            result = self._result or "miss"
            remaining = self._remaining_s
            if remaining is not None:
                track.remaining.observe(0.0 if remaining < 0.0 else remaining)  # max(r, 0.0)
        inc = track.counters.get(result)
        (inc if inc is not None else track.counter(result)).inc(1.0)
        took = self._clock.monotonic() - self._started
        track.duration.observe(0.0 if took < 0.0 else took)


class CallStarts:
    """How many calls a surface's handlers started: a plain count, so that a reader can tell
    at once whether any call started since it last looked (gateway/helper_threads.py)."""

    __slots__ = ("count",)

    def __init__(self) -> None:
        self.count = 0

    def started(self) -> None:
        """Called by the handler of every call."""
        self.count += 1


class Recorder:
    """Creates one Tally per request; shared by every surface."""

    def __init__(self, metrics: Metrics, clock: Clock) -> None:
        self.metrics = metrics
        self.clock = clock
        # The gRPC calls started (GrpcSurface.calls_in_flight looks only when some did).
        self.grpc_calls = CallStarts()
        # The label space is small and fixed: one _Track per (surface, kind), bound lazily.
        self._tracks: dict[tuple[str, str], _Track] = {}

    def track(self, surface: Surface, kind: Kind) -> Tally:
        tr = self._tracks.get((surface, kind))
        if tr is None:
            tr = self._tracks[(surface, kind)] = _Track(self.metrics, surface, kind)
        return Tally(tr, self.clock)

    def counter(self, surface: str, kind: str, result: str) -> Any:
        return self._track_for(surface, kind).counter(result)

    def histogram(self, surface: str, kind: str) -> Any:
        return self._track_for(surface, kind).duration

    def _track_for(self, surface: str, kind: str) -> _Track:
        tr = self._tracks.get((surface, kind))
        if tr is None:
            tr = self._tracks[(surface, kind)] = _Track(self.metrics, surface, kind)
        return tr
