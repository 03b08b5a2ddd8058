"""Exact per-operation call counters (in memory; read and reset through /_emulator/stats)."""

from __future__ import annotations

from collections import Counter

# Reported even when zero, so tests can read them without a KeyError.
BASE_COUNTERS = (
    "load_generic_table",
    "load_generic_table_unvended",
    "load_generic_table_credentials",
    "create_generic_table",
    "list_generic_tables",
    "drop_generic_table",
    "rename_generic_table",
    "load_table",
    "load_table_vended",
    "load_table_not_modified",
    "load_table_credentials",
    "create_table",
    "commit_table",
    "sts_assume_role",
    "config",
    "faults_injected",
    "auth_failures",
)


class Stats:
    """Counters keyed by operation name (the aiohttp route name) plus internal events."""

    def __init__(self) -> None:
        self._counts: Counter[str] = Counter()

    def incr(self, name: str, n: int = 1) -> None:
        self._counts[name] += n

    def snapshot(self) -> dict[str, int]:
        out = {name: 0 for name in BASE_COUNTERS}
        out.update(self._counts)
        return out

    def reset(self) -> None:
        self._counts.clear()
