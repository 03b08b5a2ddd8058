"""The process's helper pool (engine/helper_pool.py): its threads are made once and reused, and a
forked child (a PySpark worker) gets a pool of its own that runs work."""

from __future__ import annotations

import multiprocessing
import threading

import pytest

from lakegate_client.engine.helper_pool import WORKERS, helpers


def test_the_pool_and_its_threads_outlive_each_use() -> None:
    seen: set[int] = set()
    for _ in range(3 * WORKERS):  # one step at a time, as a write's commit uses it
        helpers().submit(lambda: seen.add(threading.get_ident())).result(timeout=5)
    assert helpers() is helpers()
    assert 1 <= len(seen) <= WORKERS
    before = threading.active_count()
    for _ in range(3 * WORKERS):
        helpers().submit(lambda: None).result(timeout=5)
    assert threading.active_count() == before


def _child(answers: multiprocessing.Queue) -> None:  # type: ignore[type-arg]
    answers.put(helpers().submit(lambda: 42).result(timeout=5))


@pytest.mark.skipif("fork" not in multiprocessing.get_all_start_methods(), reason="no fork")
def test_a_forked_child_gets_a_pool_that_runs_work() -> None:
    # the parent's pool has idle threads; a child that kept it would wait for them forever
    helpers().submit(lambda: None).result(timeout=5)
    context = multiprocessing.get_context("fork")
    answers = context.Queue()
    child = context.Process(target=_child, args=(answers,))
    child.start()
    child.join(timeout=30)
    assert child.exitcode == 0
    assert answers.get(timeout=5) == 42
