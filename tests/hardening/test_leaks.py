"""Resource snapshots and the leak budget, on a real child process."""

from __future__ import annotations

import os
import socket

from hardening.leaks import LeakBudget, ResourceSnapshot, leak_problems, settle, snapshot


def snap(fds: int = 10, conns: int = 2, threads: int = 3) -> ResourceSnapshot:
    return ResourceSnapshot(
        pid=1, num_fds=fds, num_connections=conns, established=0, num_threads=threads, rss_bytes=0
    )


def test_growth_within_budget_is_not_a_leak() -> None:
    assert (
        leak_problems(
            snap(), snap(fds=20, conns=6, threads=5), LeakBudget(fds=10, connections=4, threads=2)
        )
        == []
    )


def test_growth_beyond_budget_names_each_resource() -> None:
    problems = leak_problems(
        snap(), snap(fds=40, conns=30, threads=20), LeakBudget(fds=10, connections=4, threads=2)
    )
    assert problems == ["fds grew 10 -> 40", "sockets grew 2 -> 30", "threads grew 3 -> 20"]


def test_snapshot_sees_sockets_this_process_opens() -> None:
    before = snapshot(os.getpid())
    socks = [socket.socket() for _ in range(5)]
    try:
        during = snapshot(os.getpid())
        assert during.num_fds >= before.num_fds + 5
        assert leak_problems(before, during, LeakBudget(fds=2)) != []
    finally:
        for s in socks:
            s.close()


def test_settle_waits_until_resources_fall_back() -> None:
    socks = [socket.socket() for _ in range(6)]
    before = snapshot(os.getpid())
    before = ResourceSnapshot(**{**before.as_dict(), "num_fds": before.num_fds - 6})
    closed: list[float] = []

    def fake_sleep(seconds: float) -> None:
        closed.append(seconds)
        while socks:
            socks.pop().close()

    after, problems = settle(
        os.getpid(), before, LeakBudget(fds=2), timeout_s=2, interval_s=0.5, sleep=fake_sleep
    )
    assert problems == []
    assert closed == [0.5]
    assert after.num_fds <= before.num_fds + 2
