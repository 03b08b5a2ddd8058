"""Test-only clock shim for the gateway process under the fault suite (never shipped).

Put this directory on PYTHONPATH and set HARDEN_CLOCK_OFFSET_FILE: `time.time()` and
`time.time_ns()` then return the real wall time plus the number of seconds in that file
(re-read at most every 0.2 s of monotonic time). `time.monotonic()` is untouched, so this
simulates an NTP step / VM resume: the wall clock jumps, the monotonic clock does not.
"""

from __future__ import annotations

import os
import time


class _WallClockOffset:
    def __init__(self, path: str) -> None:
        self._path = path
        self._offset_s = 0.0
        self._next_read = 0.0
        self._real_time = time.time
        self._real_time_ns = time.time_ns

    def offset(self) -> float:
        now = time.monotonic()
        if now >= self._next_read:
            self._next_read = now + 0.2
            try:
                with open(self._path) as fh:
                    self._offset_s = float(fh.read().strip() or 0.0)
            except (OSError, ValueError):
                pass
        return self._offset_s

    def time(self) -> float:
        return self._real_time() + self.offset()

    def time_ns(self) -> int:
        return self._real_time_ns() + int(self.offset() * 1e9)


def _install() -> None:
    path = os.environ.get("HARDEN_CLOCK_OFFSET_FILE")
    if not path:
        return
    shim = _WallClockOffset(path)
    time.time = shim.time
    time.time_ns = shim.time_ns


_install()
