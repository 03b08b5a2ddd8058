"""Finding and running `promtool` (Debian package `prometheus`, via `make prometheus-bin`)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest


def promtool() -> str:
    """Path of promtool, or skip the calling test with the way to install it."""
    exe = shutil.which("promtool")
    if exe is None:
        pytest.skip("promtool not installed: `make prometheus-bin` (apt-get install prometheus)")
    return exe


def run(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """promtool with arguments; never raises on a non-zero exit (tests assert on it)."""
    return subprocess.run(
        [promtool(), *args], capture_output=True, text=True, timeout=120, cwd=cwd, check=False
    )
