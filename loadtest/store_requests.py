"""What a write asks of the object store, counted by the store itself (SeaweedFS's Prometheus
counters): requests and server seconds by request type, per side of the write benchmark.

Why from the server: the data source's store calls come from Spark's Python workers, its
planning and its commit process, which the bench cannot wrap; SeaweedFS counts every S3 request
it answers (``SeaweedFS_s3_request_total`` by ``type``: GET, PUT, POST, HEAD, LIST, DELETE)
and the time it spent on it (``SeaweedFS_s3_request_seconds``), whoever sent it. So a write's
cost splits into what the format's own library asks (the same on both sides) and what the data
source's protocol adds (markers, intents, ledger records, listings, completes).

SeaweedFS records a request's time (and, with the response code, its count) after the
handler wrote the response, so a scrape made the moment the client has its answer can miss the
last request: the scrape after a write is repeated until two in a row agree
(:data:`SETTLE_SCRAPES` at most).

Caveat: a request still running when a write returns (a lease renewal of the worker's keeper
thread) is counted with the next write, on either side.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from devstack.metrics_scrape import Samples, scrape

COUNT = "SeaweedFS_s3_request_total"
SECONDS = "SeaweedFS_s3_request_seconds_sum"
SETTLE_SCRAPES = 5  # the scrapes after a write, at most, until two in a row agree


@dataclass(frozen=True)
class StoreTally:
    """Requests and server seconds by request type (one scrape, or the growth between two)."""

    requests: Mapping[str, float] = field(default_factory=dict)
    seconds: Mapping[str, float] = field(default_factory=dict)

    @classmethod
    def of(cls, samples: Samples, bucket: str) -> StoreTally:
        """The counters of ``bucket``'s requests (every response code) in one scrape."""
        requests: dict[str, float] = {}
        seconds: dict[str, float] = {}
        for (name, labels), value in samples.items():
            found = dict(labels)
            if found.get("bucket") != bucket or "type" not in found:
                continue
            if name == COUNT:
                requests[found["type"]] = requests.get(found["type"], 0.0) + value
            elif name == SECONDS:
                seconds[found["type"]] = seconds.get(found["type"], 0.0) + value
        return cls(requests, seconds)

    def since(self, before: StoreTally) -> StoreTally:
        """The growth from ``before`` (a counter that went down, after a restart, counts 0)."""
        return StoreTally(_growth(before.requests, self.requests),
                          _growth(before.seconds, self.seconds))


def _growth(before: Mapping[str, float], after: Mapping[str, float]) -> dict[str, float]:
    grown = {k: v - before.get(k, 0.0) for k, v in after.items()}
    return {k: d for k, d in grown.items() if d > 0}


class StoreRequests:
    """Per-write tallies of one bucket's requests, summed by what was written (a label such as
    ``"datasource append"``), from the store's metrics endpoint."""

    def __init__(self, metrics_url: str, bucket: str,
                 read: Callable[[str], Samples] = scrape) -> None:
        self._url, self._bucket, self._read = metrics_url, bucket, read
        # per label: requests and seconds summed by type (Counter adds floats too), writes
        self._requests: defaultdict[str, Counter[str]] = defaultdict(Counter)
        self._seconds: defaultdict[str, Counter[str]] = defaultdict(Counter)
        self._writes: Counter[str] = Counter()

    def snapshot(self) -> StoreTally | None:
        """The counters now; None when the store's endpoint gave nothing (then the write it
        brackets is left out of the tally: it must not read as zero requests)."""
        samples = self._read(self._url)
        return StoreTally.of(samples, self._bucket) if samples else None

    def count(self, label: str, before: StoreTally | None) -> None:
        """Add one write's requests (since ``before``, taken just before it) under ``label``;
        a write with a failed snapshot on either side is not counted."""
        after = self._settled()
        if before is None or after is None:
            return
        grew = after.since(before)
        self._requests[label].update(grew.requests)
        self._seconds[label].update(grew.seconds)
        self._writes[label] += 1

    def _settled(self) -> StoreTally | None:
        """The counters once two scrapes in a row agree (the last requests recorded), or the
        last of :data:`SETTLE_SCRAPES` (requests still arriving); None: a scrape failed."""
        last = self.snapshot()
        for _ in range(SETTLE_SCRAPES - 1):
            if last is None:
                return None
            now = self.snapshot()
            if now == last:
                return now
            last = now
        return last

    def per_write(self, label: str) -> dict[str, object] | None:
        """``label``'s mean requests and server milliseconds per write, by request type, and
        how many writes they average (None: no write counted, or the store has no metrics)."""
        writes = self._writes[label]
        if not writes:
            return None
        return {
            "writes": writes,
            "requests": {k: round(v / writes, 2)
                         for k, v in sorted(self._requests[label].items())},
            "server_ms": {k: round(v * 1000 / writes, 2)
                          for k, v in sorted(self._seconds[label].items())},
        }
