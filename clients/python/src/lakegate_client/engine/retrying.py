"""The retry loop the write protocols run around each store call past a point of no return.

Why one: the plain commit and the job intent each retried their steps the same way (a few
attempts with a growing pause, logged, then the last error raised); their timings differ only in
what tests inject.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import TypeVar

__all__ = ["RETRIES", "after_commit", "retried", "with_retries"]

RETRIES = 3  # attempts of an idempotent step (a read, a listing, a delete) before giving up
T = TypeVar("T")
log = logging.getLogger(__name__)


def retried(what: str, step: Callable[[], T], *, retries: int, backoff_s: float,
            sleep: Callable[[float], None]) -> T:
    """Run ``step``; on an error retry it (``retries`` attempts in all, pausing ``backoff_s``
    times the attempt number), then re-raise the last error."""
    for attempt in range(retries):
        try:
            return step()
        except Exception:
            if attempt == retries - 1:
                raise
            log.info("%s failed (attempt %d), retrying", what, attempt + 1, exc_info=True)
            sleep(backoff_s * (attempt + 1))
    raise AssertionError("unreachable")


def with_retries(step: Callable[[], T], attempts: int = RETRIES) -> T:
    """``step()``, run again after a short pause when it raises (``attempts`` in all).

    Why: after a commit's point of no return, and when deciding whether a commit landed, one
    throttled or dropped call must not leave debris nor make the outcome look unknown. Only
    idempotent steps (reads, deletes, listings) are retried.
    """
    for attempt in range(attempts - 1):
        try:
            return step()
        except Exception:  # tried again below; the last attempt raises
            log.debug("retrying after a failed step", exc_info=True)
            time.sleep(min(0.2 * 2**attempt, 2.0))
    return step()


def after_commit(what: str, write_id: str, cleanup: Callable[[], object]) -> bool:
    """Run a cleanup that follows a durable commit, never raising; returns whether it ran.

    Spark calls ``abort`` when ``commit`` raises, and ``abort`` deletes the job's files: an
    error in the cleanup after the table already references them must not turn into that.
    What is left behind is debris (unreferenced files, pending uploads), logged, once the
    cleanup failed :data:`RETRIES` times.
    """
    try:
        with_retries(cleanup)
    except Exception:  # debris only: logged, never raised
        log.warning("after the commit of write %s, %s failed", write_id, what, exc_info=True)
        return False
    return True

