"""What one load run asks for (`LoadSpec`) and what it measured (`LoadResult`).

Both are plain picklable dataclasses: the parent builds a spec, every worker process runs a share
of it, and the parent merges the shares' results.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Literal

from loadtest.bounds import Bounds
from loadtest.latency import LatencyHistogram

Protocol = Literal["http", "grpc"]
Mode = Literal["closed", "open", "burst", "paired"]


@dataclass(frozen=True)
class LoadSpec:
    """One load run.

    Attributes:
        protocol: "http" (raw HTTP/1.1 keep-alive) or "grpc" (grpc.aio unary, raw bytes).
        target: "unix:/path" or "127.0.0.1:port".
        payload: HTTP: the prebuilt request bytes. gRPC: the serialised request message.
        grpc_method: full method path for gRPC, e.g. "/lakegate.v1.CredentialService/...".
        mode: "closed" (each connection/task loops), "open" (fixed arrival rate), "burst"
            (exactly `concurrency` requests released at once after every connection is open) or
            "paired" (a closed loop that alternates between `target` and `pair_target` every
            `slice_s`, so both servers are measured under the same machine state).
        concurrency: total connections (closed/burst) or maximum in flight (open), all processes.
        rate_per_s: open loop arrival rate, all processes together.
        bounds: caps on requests (all processes) and on the measured window (paired: both
            sides' slices together).
        warmup_s: closed/open loops run this long before recording.
        processes: number of worker processes.
        cpus: CPU set the workers pin themselves to (None = no pinning).
        expect_status: HTTP status counted as success.
        count_outcomes: parse each HTTP JSON answer's "outcome" field (burst mode only).
        pair_target: paired mode: the other server ("unix:/path" or "127.0.0.1:port").
        pair_payload: paired mode: the request sent to `pair_target`.
        slice_s: paired mode: how long each side runs before the loop switches to the other.
    """

    protocol: Protocol
    target: str
    payload: bytes
    mode: Mode
    concurrency: int
    bounds: Bounds
    grpc_method: str = ""
    rate_per_s: float = 0.0
    warmup_s: float = 0.0
    processes: int = 2
    cpus: tuple[int, ...] | None = None
    expect_status: int = 200
    count_outcomes: bool = False
    pair_target: str = ""
    pair_payload: bytes = b""
    slice_s: float = 0.0

    def __post_init__(self) -> None:
        if self.mode == "paired" and (not self.pair_target or self.slice_s <= 0):
            raise ValueError("a paired run needs pair_target and a positive slice_s")

    def other_side(self) -> LoadSpec:
        """The same run aimed at `pair_target` (paired mode's second server)."""
        return replace(self, target=self.pair_target, payload=self.pair_payload,
                       mode="closed", pair_target="", pair_payload=b"", slice_s=0.0)

    def share(self, index: int) -> LoadSpec:
        """The part of this run that worker `index` of `processes` executes."""
        n = self.processes
        conc = self.concurrency // n + (1 if index < self.concurrency % n else 0)
        return replace(
            self,
            concurrency=max(conc, 0),
            rate_per_s=self.rate_per_s / n,
            bounds=self.bounds.split(n, index),
            processes=1,
        )


@dataclass
class LoadResult:
    """Merged outcome of a run: counts over the measured window and its latency histogram."""

    requests: int = 0
    errors: int = 0
    elapsed_s: float = 0.0
    hist: LatencyHistogram = field(default_factory=LatencyHistogram.empty)
    outcomes: dict[str, int] = field(default_factory=dict)
    error_samples: list[str] = field(default_factory=list)
    client_cpu_s: float = 0.0  # CPU the generator processes used while loading

    @property
    def rps(self) -> float:
        return self.requests / self.elapsed_s if self.elapsed_s > 0 else 0.0

    def merge(self, other: LoadResult) -> None:
        """Combine a worker's share: counts add, the window is the longest worker window."""
        self.requests += other.requests
        self.errors += other.errors
        self.elapsed_s = max(self.elapsed_s, other.elapsed_s)
        self.hist.merge(other.hist)
        for key, n in other.outcomes.items():
            self.outcomes[key] = self.outcomes.get(key, 0) + n
        self.error_samples.extend(other.error_samples[: max(0, 5 - len(self.error_samples))])
        self.client_cpu_s += other.client_cpu_s

    @property
    def client_cores(self) -> float:
        """Generator CPU use in cores over the window (near the pinned CPU count = the
        generator may be the bottleneck)."""
        return self.client_cpu_s / self.elapsed_s if self.elapsed_s > 0 else 0.0

    def to_json(self) -> dict[str, object]:
        return {
            "requests": self.requests,
            "errors": self.errors,
            "elapsed_s": round(self.elapsed_s, 3),
            "rps": round(self.rps, 1),
            "latency_ms": self.hist.summary_ms(),
            "outcomes": dict(self.outcomes),
            "error_samples": list(self.error_samples),
        }
