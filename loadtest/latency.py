"""Latency recording: a mergeable fixed-bucket histogram and exact percentiles.

Load-generator processes each record into their own `LatencyHistogram` (constant memory, no
per-request allocation beyond one integer increment) and ship the bucket counts back to the
parent, which merges them. Buckets are geometric (ratio 1 + `PRECISION`), like HdrHistogram's
log-linear layout, so every reported percentile is within 1 % of the true value.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

PRECISION = 0.01
MIN_US = 1.0
MAX_US = 600_000_000.0  # 10 minutes: anything longer is clamped into the last bucket
_LOG_BASE = math.log1p(PRECISION)
N_BUCKETS = math.ceil(math.log(MAX_US / MIN_US) / _LOG_BASE) + 2


def percentile(values: Sequence[float], q: float) -> float:
    """Exact nearest-rank percentile (the smallest value with at least q % of values <= it).

    Args:
        values: the samples, in any order.
        q: percentile in [0, 100].

    Returns:
        The nearest-rank percentile, or NaN for no samples.

    Raises:
        ValueError: if q is outside [0, 100].
    """
    if not 0.0 <= q <= 100.0:
        raise ValueError(f"percentile must be within [0, 100], got {q}")
    if not values:
        return math.nan
    ordered = sorted(values)
    rank = max(1, math.ceil(q / 100.0 * len(ordered)))
    return float(ordered[rank - 1])


def bucket_index(value_us: float) -> int:
    """Index of the bucket holding `value_us` (values below 1 µs go to bucket 0)."""
    if value_us <= MIN_US:
        return 0
    if value_us >= MAX_US:
        return N_BUCKETS - 1
    return min(N_BUCKETS - 1, 1 + int(math.log(value_us / MIN_US) / _LOG_BASE))


def bucket_upper_us(index: int) -> float:
    """Upper edge of bucket `index`: the value reported for samples in it (HdrHistogram's
    "highest equivalent value", so percentiles never under-report)."""
    if index <= 0:
        return MIN_US
    return MIN_US * math.exp(index * _LOG_BASE)


@dataclass
class LatencyHistogram:
    """Mergeable latency histogram in microsecond buckets.

    `counts` is sparse (bucket index -> count) so that it pickles small across processes.
    """

    counts: dict[int, int]
    total: int = 0
    max_us: float = 0.0

    @classmethod
    def empty(cls) -> LatencyHistogram:
        return cls(counts={})

    def record_s(self, seconds: float) -> None:
        """Record one latency given in seconds."""
        self.record_us(seconds * 1e6)

    def record_us(self, value_us: float) -> None:
        """Record one latency given in microseconds."""
        idx = bucket_index(value_us)
        self.counts[idx] = self.counts.get(idx, 0) + 1
        self.total += 1
        if value_us > self.max_us:
            self.max_us = value_us

    def merge(self, other: LatencyHistogram) -> None:
        """Add `other`'s samples into this histogram."""
        for idx, n in other.counts.items():
            self.counts[idx] = self.counts.get(idx, 0) + n
        self.total += other.total
        self.max_us = max(self.max_us, other.max_us)

    def percentile_us(self, q: float) -> float:
        """Nearest-rank percentile in µs (upper bucket edge, capped at the true maximum).

        Raises:
            ValueError: if q is outside [0, 100].
        """
        if not 0.0 <= q <= 100.0:
            raise ValueError(f"percentile must be within [0, 100], got {q}")
        if self.total == 0:
            return math.nan
        rank = max(1, math.ceil(q / 100.0 * self.total))
        seen = 0
        for idx in sorted(self.counts):
            seen += self.counts[idx]
            if seen >= rank:
                return min(bucket_upper_us(idx), self.max_us)
        return self.max_us

    def percentile_ms(self, q: float) -> float:
        return self.percentile_us(q) / 1000.0

    def summary_ms(self, quantiles: Iterable[float] = (50, 90, 99, 99.9)) -> dict[str, float]:
        """`{"p50": ms, "p90": ms, ..., "max": ms}` rounded to µs."""
        out = {_label(q): round(self.percentile_ms(q), 3) for q in quantiles}
        out["max"] = round(self.max_us / 1000.0, 3)
        return out

    def to_json(self) -> dict[str, object]:
        return {
            "counts": {str(k): v for k, v in self.counts.items()},
            "total": self.total,
            "max_us": self.max_us,
        }


def _label(q: float) -> str:
    text = f"{q:g}"
    return "p" + text.replace(".", "")  # 99.9 -> p999, 50 -> p50
