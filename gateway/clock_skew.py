"""ClockSkew: the remote clocks the gateway hears (the catalog's and the IdP's HTTP `Date`).

Why: a vended credential's expiry is real time (STS's), while the gateway can only read clocks
that may be wrong: its own wall clock (stepped, mis-set) and the `Date` of whoever answered.
Each remote `Date` is anchored to the monotonic clock when it arrives, so it can be carried
forward without reading the local wall clock again: a later step of the local clock does not
move it. The credential cache asks for the IdP's clock carried forward as a third witness
(`reference_now`), so no single clock decides alone (the rule: `cache/policy.expiry_deadline`,
docs/contracts.md §3).

Disagreement is made visible: the gauge `lakegate_clock_skew_seconds{clock="catalog|idp"}`
(the remote clock minus the local wall clock), one WARNING per clock per
`CLOCK_SKEW_WARN_INTERVAL_S` while it is beyond `MAX_CLOCK_SKEW_S`, and a `lakegate check` line.
A leaf: imports only the clock, the metrics and the tuning constants.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from gateway.clock import Clock
from gateway.metrics import SKEW_CLOCKS, Metrics
from gateway.tuning import (
    CLOCK_REFERENCE_MAX_AGE_S,
    CLOCK_SKEW_WARN_INTERVAL_S,
    DATE_RESOLUTION_S,
    MAX_CLOCK_SKEW_S,
)

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class _Anchor:
    """One remote `Date` and the monotonic times of the request that carried it."""

    date_s: float
    sent_mono: float
    recv_mono: float

    def latest_now(self, mono_now: float) -> float:
        """The latest the remote clock can read at `mono_now`: the answer was dated after the
        request left, with whole-second resolution (this never understates its time)."""
        return self.date_s + DATE_RESOLUTION_S + (mono_now - self.sent_mono)

    def middle_now(self, mono_now: float) -> float:
        """The remote clock's most likely reading at `mono_now` (for the skew gauge)."""
        return (self.date_s + DATE_RESOLUTION_S / 2
                + (mono_now - (self.sent_mono + self.recv_mono) / 2))


class ClockSkew:
    """Records remote `Date`s; answers how far each remote clock is from the local one.

    Args:
        clock: the local clock (monotonic anchors, wall time to compare with).
        metrics: the one metrics object (`clock_skew` gauge).
        max_skew_s: a disagreement beyond this is warned about (and is what the cache's
            clock rule calls a disagreement).
        max_age_s: an anchor older than this is no witness any more (monotonic time stops
            during a suspend, so an old anchor may have fallen behind).
        warn_every_s: at most one WARNING per clock per this interval.
    """

    def __init__(self, clock: Clock, metrics: Metrics, *,
                 max_skew_s: float = MAX_CLOCK_SKEW_S,
                 max_age_s: float = CLOCK_REFERENCE_MAX_AGE_S,
                 warn_every_s: float = CLOCK_SKEW_WARN_INTERVAL_S) -> None:
        self._clock = clock
        self._metrics = metrics
        self.max_skew_s = max_skew_s
        self._max_age_s = max_age_s
        self._warn_every_s = warn_every_s
        self._anchors: dict[str, _Anchor] = {}
        self._warned_mono: dict[str, float] = {}

    def observe(self, source: str, date_s: float | None, sent_mono: float) -> None:
        """A `Date` from `source` (one of `SKEW_CLOCKS`) on an answer to a request sent at
        `sent_mono` and received now. Updates the gauge; warns (rate-limited) beyond the
        plausible skew."""
        if date_s is None or source not in SKEW_CLOCKS:
            return
        now_m = self._clock.monotonic()
        self._anchors[source] = _Anchor(date_s, min(sent_mono, now_m), now_m)
        skews = self.skews()
        for name, skew in skews.items():
            self._metrics.clock_skew.labels(clock=name).set(round(skew, 3))
        skew = skews[source]
        if abs(skew) > self.max_skew_s:
            last = self._warned_mono.get(source)
            if last is None or now_m - last >= self._warn_every_s:
                self._warned_mono[source] = now_m
                log.warning(
                    "the %s clock disagrees with the local clock; credentials are judged by "
                    "the clock rule (docs/contracts.md section 3)", source,
                    extra={"clock": source, "skew_s": round(skew, 1)},
                )

    def reference_now(self, source: str, mono_now: float) -> float | None:
        """The latest `source`'s clock can read at `mono_now` (epoch s), carried forward on
        the monotonic clock from its last `Date`; None if none is known or it is too old."""
        anchor = self._anchors.get(source)
        if anchor is None or mono_now - anchor.recv_mono > self._max_age_s:
            return None
        return anchor.latest_now(mono_now)

    def skews(self) -> dict[str, float]:
        """Each known remote clock minus the local wall clock, now (seconds; + is ahead)."""
        now_m = self._clock.monotonic()
        wall = self._clock.now()
        return {name: a.middle_now(now_m) - wall for name, a in self._anchors.items()}
