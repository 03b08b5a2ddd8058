"""clients/python/unasync.py: the committed blocking Client is what the asyncio source generates,
and the generation turns the asyncio facade into the blocking one (same methods, no coroutines)."""

from __future__ import annotations

import inspect
import subprocess
import sys
from pathlib import Path

from lakegate_client import AsyncClient, Client

SCRIPT = Path(__file__).resolve().parent.parent / "unasync.py"


def test_the_committed_sync_client_is_generated_from_the_async_source() -> None:
    done = subprocess.run([sys.executable, str(SCRIPT), "--check"], capture_output=True,
                          text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr


def test_both_facades_have_the_same_methods_and_signatures_one_blocking() -> None:
    renamed = {"aclose": "close", "__aenter__": "__enter__", "__aexit__": "__exit__"}
    for name, method in vars(AsyncClient).items():
        if not callable(method) or (name.startswith("_") and name not in renamed):
            continue
        twin = getattr(Client, renamed.get(name, name))
        assert not inspect.iscoroutinefunction(twin), name
        params = list(inspect.signature(method).parameters)
        assert params == list(inspect.signature(twin).parameters), name
        assert name.startswith("__") or inspect.getdoc(method) is not None, name
