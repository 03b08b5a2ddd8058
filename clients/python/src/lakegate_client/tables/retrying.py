"""The retry loop the write protocols run around each store call past a point of no return.

Why one: the plain commit and the job intent each retried their steps the same way (a few
attempts with a growing pause, logged, then the last error raised); their timings differ only in
what tests inject.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TypeVar

__all__ = ["retried"]

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
