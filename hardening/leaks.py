"""Resource snapshots of a process, to prove a fault left nothing behind.

Why psutil on the gateway pid rather than in-process counters: the harness must not trust the
daemon to report its own leaks. Open file descriptors cover sockets, pipes and files; threads
cover executor pools; connections cover sockets that stayed established after clients left.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import asdict, dataclass

import psutil


@dataclass(frozen=True)
class ResourceSnapshot:
    """Point-in-time resource use of one process."""

    pid: int
    num_fds: int
    num_connections: int
    established: int
    num_threads: int
    rss_bytes: int

    def as_dict(self) -> dict[str, int]:
        return asdict(self)


@dataclass(frozen=True)
class LeakBudget:
    """How much growth is tolerated after a fault settles (pools and caches may keep a few)."""

    fds: int = 16
    connections: int = 8
    threads: int = 4


def snapshot(pid: int) -> ResourceSnapshot:
    """Read fds, sockets, threads and RSS of `pid`.

    Raises:
        psutil.NoSuchProcess: the process is gone.
    """
    proc = psutil.Process(pid)
    with proc.oneshot():
        conns = proc.net_connections(kind="all")
        return ResourceSnapshot(
            pid=pid,
            num_fds=proc.num_fds(),
            num_connections=len(conns),
            established=sum(1 for c in conns if c.status == psutil.CONN_ESTABLISHED),
            num_threads=proc.num_threads(),
            rss_bytes=proc.memory_info().rss,
        )


def leak_problems(
    before: ResourceSnapshot, after: ResourceSnapshot, budget: LeakBudget = LeakBudget()
) -> list[str]:
    """Describe growth beyond the budget; an empty list means no leak."""
    problems: list[str] = []
    if after.num_fds - before.num_fds > budget.fds:
        problems.append(f"fds grew {before.num_fds} -> {after.num_fds}")
    if after.num_connections - before.num_connections > budget.connections:
        problems.append(f"sockets grew {before.num_connections} -> {after.num_connections}")
    if after.num_threads - before.num_threads > budget.threads:
        problems.append(f"threads grew {before.num_threads} -> {after.num_threads}")
    return problems


def settle(
    pid: int,
    before: ResourceSnapshot,
    budget: LeakBudget = LeakBudget(),
    *,
    timeout_s: float = 20.0,
    interval_s: float = 0.5,
    sleep: Callable[[float], None] = time.sleep,
) -> tuple[ResourceSnapshot, list[str]]:
    """Wait (bounded) for resources to fall back within budget; keep-alive sockets close lazily.

    Returns:
        the last snapshot and the remaining problems (empty when settled).
    """
    attempts = max(1, int(timeout_s / interval_s))
    after = snapshot(pid)
    problems = leak_problems(before, after, budget)
    for _ in range(attempts):
        if not problems:
            break
        sleep(interval_s)
        after = snapshot(pid)
        problems = leak_problems(before, after, budget)
    return after, problems
