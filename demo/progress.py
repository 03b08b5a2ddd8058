"""Progress lines while the demo runs: elapsed time and what is happening now.

Why not logging: these lines are the demo's user interface, printed to stdout and flushed at once
(Spark's JVM writes to the same terminal and would otherwise interleave badly).
"""

from __future__ import annotations

import sys
import time
from typing import TextIO


class Progress:
    """Prints ``[  12.3s] message`` lines."""

    def __init__(self, out: TextIO | None = None) -> None:
        self._out = out or sys.stdout
        self._start = time.monotonic()

    @property
    def elapsed_s(self) -> float:
        return time.monotonic() - self._start

    def __call__(self, message: str) -> None:
        self._out.write(f"[{self.elapsed_s:6.1f}s] {message}\n")
        self._out.flush()
