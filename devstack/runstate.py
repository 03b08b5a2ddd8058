"""The run directory's `pids.json`: which processes a stack started and how to find them again.

Mode 0600: it records the gateway's environment, which holds its client secret.
"""

from __future__ import annotations

import json
from pathlib import Path

from devstack import processes
from devstack.processes import ProcessRecord


def pids_path(run_dir: Path) -> Path:
    return run_dir / "pids.json"


def read_pids(run_dir: Path) -> tuple[dict[str, ProcessRecord], list[str]]:
    path = pids_path(run_dir)
    if not path.exists():
        return {}, []
    data = json.loads(path.read_text())
    records = {
        name: ProcessRecord.from_json(name, rec) for name, rec in data.get("processes", {}).items()
    }
    return records, list(data.get("tmp_sockets", []))


def write_pids(run_dir: Path, records: dict[str, ProcessRecord], tmp_sockets: list[str]) -> None:
    data = {
        "processes": {name: rec.to_json() for name, rec in records.items()},
        "tmp_sockets": tmp_sockets,
    }
    path = pids_path(run_dir)
    path.write_text(json.dumps(data, indent=1))
    path.chmod(0o600)  # holds the gateway's environment (client secret)


def running_processes(run_dir: Path) -> dict[str, ProcessRecord]:
    """Recorded processes of the stack in `run_dir` that are still alive."""
    records, _ = read_pids(Path(run_dir))
    return {n: r for n, r in records.items() if processes.is_alive(r)}
