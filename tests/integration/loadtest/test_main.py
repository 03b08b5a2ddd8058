"""`python -m loadtest` (loadtest/__main__.py) on the real local stack: a SIGTERM in the middle
of a run stops every process the bench started, as Ctrl-C does (the default action of SIGTERM
had left the stack's IdP, SeaweedFS, NATS and catalog emulator running)."""

from __future__ import annotations

import os
import queue
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterable
from pathlib import Path

import psutil

REPO = Path(__file__).resolve().parents[3]
_START_TIMEOUT_S = 180.0
_EXIT_TIMEOUT_S = 90.0


def _holders(marker: str) -> list[int]:
    """The pids of live processes whose command line names `marker` (the bench's work dir)."""
    return [p.info["pid"] for p in psutil.process_iter(["pid", "cmdline", "status"])
            if p.info["pid"] != os.getpid() and p.info["status"] != psutil.STATUS_ZOMBIE
            and any(marker in arg for arg in p.info["cmdline"] or ())]


def _pump(stream: Iterable[str], lines: queue.Queue[str]) -> None:
    """Every line of `stream` into `lines`, then "" at its end."""
    for line in stream:
        lines.put(line)
    lines.put("")


def test_sigterm_during_a_run_stops_everything_the_bench_started(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    bench = subprocess.Popen(
        [sys.executable, "-m", "loadtest", "--quick", "--only", "cold_herd", "--no-pin",
         "--out", str(tmp_path / "out")],
        cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    work = ""
    seen: list[str] = []
    try:
        assert bench.stdout is not None
        lines: queue.Queue[str] = queue.Queue()
        reader = threading.Thread(target=_pump, args=(bench.stdout, lines), daemon=True)
        reader.start()  # ends at the pipe's end; until "stack up", each line waits bounded
        deadline = time.monotonic() + _START_TIMEOUT_S
        while (left_s := deadline - time.monotonic()) > 0:
            try:
                line = lines.get(timeout=left_s)
            except queue.Empty:
                break
            if not line:
                break
            seen.append(line)
            m = re.search(r"work dir (\S+)", line)
            if m:
                work = m.group(1)
            if "stack up" in line:
                break
        assert work, "".join(seen[-20:])
        assert "stack up" in seen[-1], "".join(seen[-20:])
        time.sleep(2.0)  # into the scenario: its gateway and load are running too
        assert _holders(work), "the stack's servers should be running now"
        bench.send_signal(signal.SIGTERM)
        bench.wait(timeout=_EXIT_TIMEOUT_S)
        reader.join(timeout=10)  # a leftover server holding the pipe is what the test finds
        while not lines.empty():
            seen.append(lines.get_nowait())
        out = "".join(seen)
        assert bench.returncode == 130, out[-2000:]
        assert "bench interrupted" in out
        left = _holders(work)
        assert left == [], f"processes left running: {left}"
    finally:
        if bench.poll() is None:
            bench.kill()
            bench.wait(10)
        for pid in _holders(work) if work else ():  # a failed run's leftovers, by pid
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
