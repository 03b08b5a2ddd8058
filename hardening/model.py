"""The model-based tests (tests/unit/cache/test_credential_cache_model.py, the credential
cache; tests/unit/cache/test_identity_model.py, coherence with a lagging catalog and change
events; tests/unit/test_coherence_model.py, the same along the whole path from the client's
memo) with their longer `harden` profiles: more and longer random runs than `make test`
affords.

It needs no stack: pytest runs it in a child process with `LAKEGATE_MODEL_PROFILE=harden`.
A failure (an invariant broken, with hypothesis's shrunk counterexample in the output) fails
the hardening run.
"""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path
from typing import Any

MODEL_TESTS = ("tests/unit/cache/test_credential_cache_model.py",
               "tests/unit/cache/test_identity_model.py",
               "tests/unit/test_coherence_model.py")
TIMEOUT_S = 1800


def run_model_suite(repo_root: Path, python: str) -> dict[str, Any]:
    """Run the model tests under their `harden` profiles.

    Returns:
        {"passed", "duration_s", "profile", "tail"} (`tail`: the last output lines).
    """
    env = {**os.environ, "LAKEGATE_MODEL_PROFILE": "harden"}
    started = time.monotonic()
    try:
        done = subprocess.run(
            [python, "-m", "pytest", "-p", "no:cacheprovider", "-q", *MODEL_TESTS],
            cwd=repo_root, env=env, capture_output=True, text=True, timeout=TIMEOUT_S,
            check=False,
        )
        passed, out = done.returncode == 0, done.stdout + done.stderr
    except subprocess.TimeoutExpired:
        passed, out = False, f"timed out after {TIMEOUT_S} s"
    lines = [line for line in out.splitlines() if not line.startswith("WARNING ")]
    return {"passed": passed, "duration_s": round(time.monotonic() - started, 1),
            "profile": "harden", "tail": lines[-40:]}
