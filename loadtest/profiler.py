"""Sampling profiles of a running server with py-spy, and their top frames.

Why: the surfaces scenario measures how fast the gateway serves a cached credential; the profile
says where that time goes (issue #25: "profile first"). py-spy samples the gateway process from
outside (no instrumentation, no change to the code measured) while the bench drives one extra
closed loop against it; the raw collapsed stacks are kept next to the report and summarised as
the frames with the most samples: by self time (the frame on top of the stack) and inclusive
(the frame anywhere on it).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

RATE_HZ = 200
TOP_N = 15


def py_spy() -> str | None:
    """The py-spy executable next to this Python (the project venv), else on PATH, else None."""
    local = Path(sys.executable).with_name("py-spy")
    if local.exists():
        return str(local)
    return shutil.which("py-spy")


class Sampler:
    """One `py-spy record` of `pid` for `duration_s`, writing collapsed stacks to `out`."""

    def __init__(self, exe: str, pid: int, out: Path, duration_s: float) -> None:
        self.out = out
        self._proc = subprocess.Popen(
            [exe, "record", "--pid", str(pid), "--rate", str(RATE_HZ), "--duration",
             str(max(1, round(duration_s))), "--format", "raw", "--nonblocking",
             "--output", str(out)],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
        )

    def wait(self, timeout_s: float) -> str | None:
        """Wait for the recording to end; returns an error text, or None when it is written."""
        try:
            _, err = self._proc.communicate(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.communicate()
            return "py-spy did not finish in time"
        if self._proc.returncode != 0 or not self.out.exists():
            text = err.decode(errors="replace").strip().splitlines()
            return f"py-spy exit {self._proc.returncode}: {text[-1] if text else ''}"[:300]
        return None


def _frame_name(frame: str) -> str:
    """`func (path/to/module.py:123)` -> `func (module.py)`: lines differ per call site."""
    name, _, where = frame.partition(" (")
    file = where.rsplit(":", 1)[0].rstrip(")")
    return f"{name} ({Path(file).name})" if file else name


def top_frames(collapsed: str, n: int = TOP_N) -> dict[str, Any]:
    """The `n` frames with the most samples from py-spy's raw (collapsed) output.

    Each line is `frame;frame;...;frame count`, outermost first. Returns the sample count and,
    per frame, its share of the samples on top of the stack (`self`) and anywhere on it
    (`inclusive`, a frame counted once per sample however deep its recursion).
    """
    self_counts: Counter[str] = Counter()
    incl_counts: Counter[str] = Counter()
    total = 0
    for line in collapsed.splitlines():
        stack, _, count_text = line.rpartition(" ")
        if not stack or not count_text.isdigit():
            continue
        count = int(count_text)
        frames = [_frame_name(f) for f in stack.split(";") if f]
        if not frames:
            continue
        total += count
        self_counts[frames[-1]] += count
        for name in set(frames):
            incl_counts[name] += count

    def share(counts: Counter[str]) -> list[list[Any]]:
        return [[name, round(100.0 * c / total, 1)] for name, c in counts.most_common(n)]

    if total == 0:
        return {"samples": 0, "self_pct": [], "inclusive_pct": []}
    return {"samples": total, "self_pct": share(self_counts),
            "inclusive_pct": share(incl_counts)}
