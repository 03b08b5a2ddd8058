"""Kill -9 and restart a stack component exactly as it was started.

Why capture from the live process (psutil: argv, environment, cwd) instead of asking the
launcher: the fault suite must restart the IdP, the catalog emulator and SeaweedFS the way the
stack started them, and the stack's launcher exposes start/stop of the whole stack only. Every
process is started, recorded and stopped by pid through devstack.processes.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import psutil

from devstack.processes import ProcessRecord, ProcessTable


class HarnessError(Exception):
    """The harness itself could not set up or restore a fault (not a gateway defect)."""


@dataclass(frozen=True)
class ProcessSpec:
    """How to start a process again: argv, environment and working directory."""

    name: str
    argv: tuple[str, ...]
    env: Mapping[str, str]
    cwd: str


def capture(name: str, pid: int) -> ProcessSpec:
    """Record how `pid` was started, so it can be respawned after a kill -9."""
    proc = psutil.Process(pid)
    return ProcessSpec(
        name=name, argv=tuple(proc.cmdline()), env=dict(proc.environ()), cwd=proc.cwd()
    )


def respawn(table: ProcessTable, spec: ProcessSpec, log_path: Path) -> ProcessRecord:
    """Start a captured process again, with its exact environment, recorded in `table`."""
    return table.spawn(spec.name, spec.argv, log_path=log_path, base_env=spec.env,
                       cwd=Path(spec.cwd))
