"""A fleet of load-client processes and the aggregate of what they saw.

Why processes: executors are separate processes on a node; one process with many tasks would
share a connection pool and hide per-process effects (reconnects after a gateway restart).
"""

from __future__ import annotations

import json
import os
import signal
import sys
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

from devstack.processes import ProcessTable, wait_gone
from hardening.loadclient import LoadConfig


@dataclass
class FleetResult:
    """Totals over every client process of one run."""

    requests: int = 0
    ok: int = 0
    errors: int = 0
    expired: int = 0
    below_floor: int = 0
    no_expiry: int = 0
    min_remaining_s: float | None = None
    min_remaining_claimed_s: float | None = None
    errors_by_kind: dict[str, int] = field(default_factory=dict)
    error_times: list[float] = field(default_factory=list)
    planted: set[str] = field(default_factory=set)
    missing_results: int = 0

    def errors_between(self, start: float, end: float) -> int:
        return sum(1 for t in self.error_times if start <= t <= end)

    def last_error_after(self, start: float) -> float | None:
        later = [t for t in self.error_times if t >= start]
        return max(later) if later else None


class LoadFleet:
    """Start N load-client processes, stop them by pid, collect their results.

    Args:
        run_dir: where result and log files go.
        configs: one `LoadConfig` per process (`out` and `stop_file` are filled in here).
        python: interpreter for the clients (the venv's).
        repo_root: working directory, so `hardening` is importable.
    """

    def __init__(
        self,
        run_dir: Path,
        configs: list[LoadConfig],
        *,
        python: str = sys.executable,
        repo_root: Path,
    ) -> None:
        self._dir = run_dir
        self._dir.mkdir(parents=True, exist_ok=True)
        self._stop_file = self._dir / "STOP"
        self._configs = [
            replace(c, out=str(self._dir / f"client-{i}.json"), stop_file=str(self._stop_file))
            for i, c in enumerate(configs)
        ]
        self._python = python
        self._root = repo_root
        self._procs = ProcessTable()

    def start(self) -> None:
        self._stop_file.unlink(missing_ok=True)
        env = {**os.environ, "PYTHONPATH": str(self._root)}
        for i, cfg in enumerate(self._configs):
            self._procs.spawn(
                f"loadclient-{i}",
                [self._python, "-m", "hardening.loadclient", "--config", json.dumps(asdict(cfg))],
                base_env=env,
                cwd=self._root,
                log_path=self._dir / f"client-{i}.log",
            )

    def stop(self, timeout_s: float = 20.0) -> FleetResult:
        """Ask every client to stop (stop file, then SIGTERM), wait by pid, aggregate results."""
        self._stop_file.touch()
        for record in self._procs.started:
            if not wait_gone(record.pid, timeout_s):
                try:
                    os.kill(record.pid, signal.SIGTERM)
                except ProcessLookupError:
                    pass
        self._procs.stop_all(timeout_s=5)
        return self.collect()

    def collect(self) -> FleetResult:
        result = FleetResult()
        for cfg in self._configs:
            path = Path(cfg.out)
            if not path.exists():
                result.missing_results += 1
                continue
            data = json.loads(path.read_text())
            result.requests += data["requests"]
            result.ok += data["ok"]
            result.errors += data["errors"]
            result.expired += data["expired"]
            result.below_floor += data["below_floor"]
            result.no_expiry += data["no_expiry"]
            mr = data.get("min_remaining_s")
            if mr is not None and (result.min_remaining_s is None or mr < result.min_remaining_s):
                result.min_remaining_s = mr
                result.min_remaining_claimed_s = data.get("min_remaining_claimed_s")
            for k, v in data["errors_by_kind"].items():
                result.errors_by_kind[k] = result.errors_by_kind.get(k, 0) + v
            result.error_times.extend(data["error_times"])
            result.planted.update(data["planted"])
            # The result holds vended secrets for the scanner; do not leave it on disk.
            path.unlink()
        result.error_times.sort()
        return result
