"""Per-request accounting: every surface request is counted exactly once.

`lakegate_requests_total{surface,kind,result}` must equal the truth exactly in deterministic tests,
so the count happens in one place, on the way out of the request, whatever path it took:
the cache outcome on success (hit|miss|coalesced|stale), `denied` when the caller was refused
(auth, policy, rate limit, forgeable request), `error` for everything else (bad input, upstream
errors, cancellation).
"""

from __future__ import annotations

from types import TracebackType
from typing import Any, Literal

from gateway.clock import Clock
from gateway.errors import PermissionDeniedError, RateLimitedCallerError, UnauthenticatedError
from gateway.metrics import Metrics
from gateway.models import Outcome

Surface = Literal["http", "grpc", "rest", "aws"]
Kind = Literal["credential", "metadata", "admin"]

_DENIED = (UnauthenticatedError, PermissionDeniedError, RateLimitedCallerError)


def result_for(exc: BaseException) -> str:
    """The `result` label of a failed request."""
    return "denied" if isinstance(exc, _DENIED) else "error"


class Tally:
    """One request in flight; `served()` sets the success result before the context exits."""

    __slots__ = ("_clock", "_kind", "_recorder", "_remaining_s", "_result", "_started", "_surface")

    def __init__(self, recorder: Recorder, surface: Surface, kind: Kind) -> None:
        self._recorder = recorder
        self._clock = recorder.clock
        self._surface = surface
        self._kind = kind
        self._result: str | None = None
        self._remaining_s: float | None = None
        self._started = 0.0

    def served(self, outcome: Outcome | str, remaining_s: float | None = None) -> None:
        """Record the success result (the cache outcome, or `miss`/`hit` for metadata)."""
        self._result = str(outcome)
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
        rec = self._recorder
        if exc is not None:
            result = result_for(exc)
        else:
            # Metadata calls that went upstream and did not name an outcome count as a miss.
            result = self._result or "miss"
            if self._remaining_s is not None:
                rec.metrics.served_remaining.observe(max(self._remaining_s, 0.0))
        rec.counter(self._surface, self._kind, result).inc()
        rec.histogram(self._surface, self._kind).observe(
            max(self._clock.monotonic() - self._started, 0.0)
        )


class Recorder:
    """Creates one Tally per request; shared by every surface."""

    def __init__(self, metrics: Metrics, clock: Clock) -> None:
        self.metrics = metrics
        self.clock = clock
        # Label children cached per label set: `labels()` is a locked dict lookup per call,
        # measurable on the cached-credential hot path. The label space is small and fixed.
        self._counters: dict[tuple[str, str, str], Any] = {}
        self._histograms: dict[tuple[str, str], Any] = {}

    def track(self, surface: Surface, kind: Kind) -> Tally:
        return Tally(self, surface, kind)

    def counter(self, surface: str, kind: str, result: str) -> Any:
        key = (surface, kind, result)
        child = self._counters.get(key)
        if child is None:
            child = self._counters[key] = self.metrics.requests.labels(surface, kind, result)
        return child

    def histogram(self, surface: str, kind: str) -> Any:
        key = (surface, kind)
        child = self._histograms.get(key)
        if child is None:
            child = self._histograms[key] = self.metrics.request_duration.labels(surface, kind)
        return child
