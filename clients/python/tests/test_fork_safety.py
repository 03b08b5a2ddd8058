"""Fork safety of Client (_client.py's per-pid state, _grpc.py's channel options).

PySpark forks its Python workers from a daemon that may already have used a client. A client
created and used before ``fork()`` must work in every child, on a channel the child created itself,
without hanging and without touching the parent's channel or connection pool.
"""

from __future__ import annotations

import asyncio
import json
import os
import select
import signal
import time
from collections.abc import Callable
from typing import Any

import pytest

from lakegate_client import AsyncClient, Client

FORKS = 1000
PARALLEL = 4
CHILD_DEADLINE_S = 20.0  # per child: a hang is a failure, never a stuck test run
FORMS = ["grpc+uds", "http+uds", "grpc", "http"]  # child i uses FORMS[i % 4]: 250 forks each


def _report_and_exit(ask: Callable[[], dict[str, Any]], write_fd: int) -> None:
    """Runs ``ask`` in the forked child and writes its report (or error) to the parent."""
    code = 1
    try:
        report = ask()
        code = 0
    except BaseException as exc:  # noqa: BLE001 - reported to the parent, which fails the test
        report = {"pid": os.getpid(), "error": repr(exc)}
    try:
        os.write(write_fd, json.dumps(report).encode())
    finally:
        os._exit(code)  # no atexit/finalizers: nothing inherited may be torn down here


def _child(client: Client, write_fd: int) -> None:
    """Runs in the forked child; never returns."""

    def ask() -> dict[str, Any]:
        first = client.credentials("ns", "orders").outcome
        again = client.credentials("ns", "orders").outcome
        return {"pid": os.getpid(), "id": client.connection_id, "first": first, "again": again}

    _report_and_exit(ask, write_fd)


def _reap(pid: int, read_fd: int) -> dict[str, Any]:
    data = b""
    while chunk := os.read(read_fd, 65536):
        data += chunk
    os.close(read_fd)
    _, status = os.waitpid(pid, 0)
    report: dict[str, Any] = json.loads(data) if data else {"error": "no report"}
    report["exit"] = os.waitstatus_to_exitcode(status)
    report["expected_pid"] = pid
    return report


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_thousand_forks_each_use_their_own_channel(fake_gateway: Any) -> None:
    clients = {
        form: Client(url, warehouse="demo", timeout_s=5) for form, url in fake_gateway.urls.items()
    }
    # The parent opens every channel and fills its memo first: the hard case for a child.
    for client in clients.values():
        assert client.credentials("ns", "orders").outcome in ("hit", "miss")
    parent_ids = {form: c.connection_id for form, c in clients.items()}
    calls_before = fake_gateway.stats()["calls"].get("credentials", 0)

    live: dict[int, int] = {}  # read fd -> pid
    deadlines: dict[int, float] = {}
    reports: list[dict[str, Any]] = []
    hung: list[int] = []
    started = 0
    began = time.monotonic()
    while started < FORKS or live:
        while started < FORKS and len(live) < PARALLEL:
            form = FORMS[started % len(FORMS)]
            read_fd, write_fd = os.pipe()
            pid = os.fork()
            if pid == 0:
                os.close(read_fd)
                _child(clients[form], write_fd)
            os.close(write_fd)
            live[read_fd] = pid
            deadlines[read_fd] = time.monotonic() + CHILD_DEADLINE_S
            started += 1
        ready, _, _ = select.select(list(live), [], [], 1.0)
        for fd in ready:
            reports.append(_reap(live.pop(fd), fd))
        for fd in [fd for fd in live if time.monotonic() > deadlines[fd]]:
            pid = live.pop(fd)
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            os.close(fd)
            hung.append(pid)
    elapsed = time.monotonic() - began

    assert hung == [], f"{len(hung)} children hung"
    failures = [r for r in reports if r["exit"] != 0 or "error" in r]
    assert failures == [], failures[:3]
    assert len(reports) == FORKS
    for report in reports:
        # Each child's channels were created by the child itself, never inherited.
        assert report["pid"] == report["expected_pid"]
        assert report["id"].startswith(f"{report['pid']}:")
        assert report["id"] not in parent_ids.values()
        # A fresh memo per process: the first ask reaches the gateway, the second does not.
        assert report["first"] in ("hit", "miss")
        assert report["again"] == "memo"
    assert fake_gateway.stats()["calls"]["credentials"] - calls_before == FORKS

    # The parent is untouched: same channels, still working, still memoised.
    assert {form: c.connection_id for form, c in clients.items()} == parent_ids
    for client in clients.values():
        assert client.credentials("ns", "orders").outcome == "memo"
        assert client.load("ns", "orders").format == "parquet"
        client.close()
    print(f"{FORKS} forks in {elapsed:.1f} s")


ASYNC_FORKS = 100


def _async_child(client: AsyncClient, write_fd: int) -> None:
    """Runs in the forked child with a new event loop; never returns."""

    async def ask() -> dict[str, Any]:
        first = (await client.credentials("ns", "orders")).outcome
        again = (await client.credentials("ns", "orders")).outcome
        return {"pid": os.getpid(), "id": client.connection_id, "first": first, "again": again}

    _report_and_exit(lambda: asyncio.run(ask()), write_fd)


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_async_client_used_before_fork_works_in_children(fake_gateway: Any) -> None:
    clients = {
        form: AsyncClient(url, warehouse="demo", timeout_s=5)
        for form, url in fake_gateway.urls.items()
    }

    async def warm() -> dict[str, str]:
        for client in clients.values():
            await client.credentials("ns", "orders")
        return {form: c.connection_id for form, c in clients.items()}

    parent_ids = asyncio.run(warm())
    reports: list[dict[str, Any]] = []
    for i in range(ASYNC_FORKS):
        read_fd, write_fd = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(read_fd)
            _async_child(clients[FORMS[i % len(FORMS)]], write_fd)
        os.close(write_fd)
        ready, _, _ = select.select([read_fd], [], [], CHILD_DEADLINE_S)
        if not ready:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            os.close(read_fd)
            pytest.fail(f"async child {i} ({FORMS[i % len(FORMS)]}) hung")
        reports.append(_reap(pid, read_fd))

    failures = [r for r in reports if r["exit"] != 0 or "error" in r]
    assert failures == [], failures[:3]
    for report in reports:
        assert report["id"].startswith(f"{report['pid']}:")
        assert report["id"] not in parent_ids.values()
        assert report["first"] in ("hit", "miss")
        assert report["again"] == "memo"
