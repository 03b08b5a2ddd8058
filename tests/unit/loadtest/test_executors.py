"""Executor-simulation parts that need no server (loadtest/executors.py)."""

from __future__ import annotations

import itertools

from loadtest.executors import ExecutorResult, ExecutorSpec, vended_expiry_s, zipf_weights
from loadtest.scenarios.executors import per_table_lifetime


def test_zipf_popularity_is_skewed_towards_the_first_tables() -> None:
    w = zipf_weights(50)
    assert w[0] == 1.0
    assert all(a > b for a, b in itertools.pairwise(w))
    assert w[0] / sum(w) > 0.2  # the hottest of 50 tables gets over a fifth of requests


def test_executor_shares_cover_every_executor_once() -> None:
    spec = ExecutorSpec(
        mode="gateway",
        target="unix:/x",
        paths=("/a",),
        weights=(1.0,),
        executors=401,
        duration_s=1.0,
        max_requests=1000,
        processes=4,
    )
    shares = [spec.share(i) for i in range(4)]
    assert sum(s.executors for s in shares) == 401
    assert sum(s.max_requests for s in shares) <= 1000
    assert len({s.seed for s in shares}) == 4


def test_merged_executor_results_keep_the_lowest_remaining_lifetime() -> None:
    a = ExecutorResult(requests=5, min_remaining_s=40.0, outcomes={"hit": 5})
    b = ExecutorResult(
        requests=3, errors=1, min_remaining_s=12.5, outcomes={"hit": 2, "stale": 1}
    )
    a.merge(b)
    assert (a.requests, a.errors, a.min_remaining_s) == (8, 1, 12.5)
    assert a.outcomes_after_warmup == {"hit": 7, "stale": 1}


def test_vended_expiry_is_the_earliest_s3_expiry_and_none_without_one() -> None:
    body = (b'{"storage-credentials": ['
            b'{"prefix": "s3://b/a", "config": {"s3.session-token-expires-at-ms": "2000"}},'
            b'{"prefix": "s3://b/b", "config": {"s3.session-token-expires-at-ms": "1500"}}]}')
    assert vended_expiry_s(body) == 1.5
    assert vended_expiry_s(b'{"storage-credentials": [{"prefix": "p", "config": {}}]}') is None
    assert vended_expiry_s(b'{"table": {}}') is None
    assert vended_expiry_s(b"not json") is None


def test_per_table_lifetime_normalises_by_tables_and_lifetimes_in_the_window() -> None:
    # 50 tables, a 30 s window of 10 s lifetimes: 3 lifetimes; 187 calls -> 1.247 per table each
    assert per_table_lifetime(187, 50, 30.0, 10.0) == 1.247
    assert per_table_lifetime(0, 0, 30.0, 10.0) == 0.0


def test_memo_hits_add_up_when_results_merge() -> None:
    a, b = ExecutorResult(requests=10, memo_hits=7), ExecutorResult(requests=5, memo_hits=4)
    a.merge(b)
    assert (a.requests, a.memo_hits) == (15, 11)
