"""Splitting a load run between worker processes (loadtest/spec.py)."""

from __future__ import annotations

import pytest

from loadtest.bounds import Bounds
from loadtest.latency import LatencyHistogram
from loadtest.spec import LoadResult, LoadSpec


def test_shares_add_up_to_the_whole_concurrency_and_rate() -> None:
    spec = LoadSpec(
        "http", "unix:/x", b"", "closed", 10, Bounds(900, 2.0), rate_per_s=300.0, processes=4
    )
    shares = [spec.share(i) for i in range(4)]
    assert sum(s.concurrency for s in shares) == 10
    assert sum(s.rate_per_s for s in shares) == 300.0
    assert sum(s.bounds.max_requests for s in shares) == 900
    assert all(s.processes == 1 for s in shares)


def test_merged_result_adds_counts_and_keeps_the_longest_window() -> None:
    a = LoadResult(requests=10, errors=1, elapsed_s=2.0, outcomes={"hit": 9})
    b = LoadResult(
        requests=30,
        errors=0,
        elapsed_s=2.5,
        outcomes={"hit": 29, "miss": 1},
        hist=LatencyHistogram.empty(),
    )
    a.merge(b)
    assert (a.requests, a.errors, a.elapsed_s) == (40, 1, 2.5)
    assert a.outcomes == {"hit": 38, "miss": 1}
    assert a.rps == 16.0


def test_a_burst_of_ten_over_four_processes_still_sends_ten() -> None:
    spec = LoadSpec("http", "unix:/x", b"", "burst", 10, Bounds(10, 60.0), processes=4)
    shares = [spec.share(i) for i in range(4)]
    assert sum(min(s.concurrency, s.bounds.max_requests) for s in shares) == 10


def test_a_paired_run_needs_its_other_server_and_a_slice() -> None:
    with pytest.raises(ValueError, match="pair_target"):
        LoadSpec("http", "unix:/x", b"", "paired", 1, Bounds(10, 1.0), slice_s=0.2)
    with pytest.raises(ValueError, match="slice_s"):
        LoadSpec("http", "unix:/x", b"", "paired", 1, Bounds(10, 1.0), pair_target="unix:/y")


def test_the_other_side_of_a_pair_is_the_same_run_aimed_at_the_other_server() -> None:
    spec = LoadSpec("grpc", "unix:/gw", b"req", "paired", 16, Bounds(100, 3.0), processes=2,
                    pair_target="unix:/base", pair_payload=b"base-req", slice_s=0.2)
    share = spec.share(1)
    assert (share.pair_target, share.pair_payload) == ("unix:/base", b"base-req")
    assert share.slice_s == 0.2
    other = share.other_side()
    assert (other.target, other.payload, other.mode) == ("unix:/base", b"base-req", "closed")
    assert (other.protocol, other.concurrency) == ("grpc", 8)
