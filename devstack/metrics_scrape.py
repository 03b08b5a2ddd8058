"""Read a gateway's Prometheus `/metrics`: the one scrape of the tests, the bench, the hardening
suites and the demo.

Why from the outside: the counters are evidence of what happened inside the gateway (requests
by cache result, upstream calls, stale serves, refresh failures, ingress rejections) that does
not depend on its logs.
"""

from __future__ import annotations

import re
import urllib.request
from collections.abc import Mapping

_SAMPLE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+(\S+)")
_LABEL = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def parse(text: str) -> Samples:
    """Prometheus text exposition → {(name, labels): value} (comments and bad lines skipped)."""
    out: Samples = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        m = _SAMPLE.match(line)
        if not m:
            continue
        try:
            value = float(m.group(3))
        except ValueError:
            continue
        labels = frozenset(_LABEL.findall(m.group(2) or ""))
        out[(m.group(1), labels)] = value
    return out


def scrape(base_url: str, timeout_s: float = 5.0) -> Samples:
    """GET `/metrics` (loopback: any HTTP(S)_PROXY is bypassed); an unreachable gateway yields
    an empty sample set."""
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with opener.open(base_url + "/metrics", timeout=timeout_s) as resp:
            return parse(resp.read().decode(errors="replace"))
    except OSError:
        return {}


def total(samples: Samples, name: str, **labels: str) -> float:
    """Sum of `name` over every series whose labels include `labels`."""
    want = set(labels.items())
    return sum(v for (n, ls), v in samples.items() if n == name and want <= ls)


def delta(before: Samples, after: Samples, name: str, **labels: str) -> float:
    """Counter growth between two scrapes (a restart in between resets, so never negative)."""
    return max(0.0, total(after, name, **labels) - total(before, name, **labels))


def summarize(
    before: Samples, after: Samples, counters: Mapping[str, tuple[str, dict[str, str]]]
) -> dict[str, float]:
    return {label: delta(before, after, name, **lbls) for label, (name, lbls) in counters.items()}
