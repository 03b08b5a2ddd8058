"""What every scenario gets: the stack, the profile, the CPU plan and a logger."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from loadtest.profile import Profile
from loadtest.stack import BenchStack


@dataclass
class BenchContext:
    """Shared by the scenarios of one bench run.

    Attributes:
        server_cpus: CPUs every server (gateway, baseline) is pinned to, or None.
        client_cpus: CPUs every load-generator process pins itself to, or None.
        profile_dir: where the surfaces scenario writes py-spy profiles of the gateway's hit
            path (`--profile`), or None for no profiling.
    """

    stack: BenchStack
    profile: Profile
    work_dir: Path
    server_cpus: set[int] | None
    client_cpus: tuple[int, ...] | None
    log: Callable[[str], None] = print
    profile_dir: Path | None = None
    started: float = field(default_factory=time.monotonic)

    def say(self, text: str) -> None:
        self.log(f"[{time.monotonic() - self.started:7.1f}s] {text}")
