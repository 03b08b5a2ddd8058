"""Ratios of interleaved pairs (gateway and trivial server), summarised the way pyperf
summarises repeated runs: a median with its spread, not one best run each.

Why: on a shared 2-core machine the trivial server's own best moved from 21k to 30k req/s between
two runs minutes apart, so a best-of-one ratio could show neither a met target nor a regression.
Each pair shares the machine's state (the surfaces scenario alternates its two servers every few
tenths of a second within one loop; the writes scenario runs its two writes back to back); the
ratio of each pair is the sample, and a target is met when the lower quartile of those samples
meets it (three pairs in four at least as good), which a lucky pair cannot fake.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class RatioStats:
    """The per-pair ratios gateway / trivial server of one surface at one concurrency."""

    ratios: tuple[float, ...]

    @classmethod
    def of_pairs(cls, pairs: Sequence[tuple[float, float]]) -> RatioStats:
        """`pairs` = (gateway req/s, trivial server req/s) per interleaved pair; a pair whose
        trivial run made no request proves nothing and is left out."""
        return cls(tuple(g / b for g, b in pairs if b > 0))

    @property
    def n(self) -> int:
        return len(self.ratios)

    @property
    def median(self) -> float | None:
        return statistics.median(self.ratios) if self.ratios else None

    @property
    def quartiles(self) -> tuple[float, float] | None:
        """(lower, upper) quartile; with one sample both are that sample."""
        if not self.ratios:
            return None
        if len(self.ratios) == 1:
            return self.ratios[0], self.ratios[0]
        q1, _, q3 = statistics.quantiles(self.ratios, n=4, method="inclusive")
        return q1, q3

    def meets(self, target: float) -> bool | None:
        """Met when the lower quartile is at least `target`; None when nothing was measured."""
        q = self.quartiles
        return None if q is None else q[0] >= target

    def summary(self) -> dict[str, Any]:
        q = self.quartiles
        return {
            "pairs": self.n,
            "median": _r(self.median),
            "q1": _r(q[0]) if q else None,
            "q3": _r(q[1]) if q else None,
            "min": _r(min(self.ratios)) if self.ratios else None,
            "max": _r(max(self.ratios)) if self.ratios else None,
            "ratios": [round(r, 3) for r in self.ratios],
        }


def _r(x: float | None) -> float | None:
    return None if x is None else round(x, 3)
