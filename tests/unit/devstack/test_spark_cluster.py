"""SparkCluster start-up order: the master's JVM and the node gateways start together."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

from devstack import spark_cluster
from devstack.processes import ProcessRecord
from devstack.spark_cluster import SparkCluster
from devstack.stack_info import GatewayInfo


class _Recorder:
    """Fakes of what SparkCluster starts; records the order things happen in."""

    def __init__(self, workers: int) -> None:
        self.events: list[str] = []
        self.lock = threading.Lock()
        # Every gateway start waits here for the others: passes only if they run at once.
        self.barrier = threading.Barrier(workers, timeout=5.0)
        self.stopped: list[str] = []

    def note(self, event: str) -> None:
        with self.lock:
            self.events.append(event)

    def spawn(self, name: str, argv: list[str], *, log_path: Path,
              env_extra: dict[str, str]) -> ProcessRecord:
        self.note(f"spawn {name}")
        return ProcessRecord(name=name, pid=1, create_time=0.0, log_path=str(log_path))

    def start_gateway(self, run_dir: Path, info: Any, **_: Any) -> tuple[ProcessRecord,
                                                                          GatewayInfo]:
        self.note(f"gateway {run_dir.name} starting")
        self.barrier.wait()
        self.note(f"gateway {run_dir.name} ready")
        sock = str(run_dir / "grpc.sock")
        return (ProcessRecord(name=f"gw-{run_dir.name}", pid=2, create_time=0.0, log_path=""),
                GatewayInfo(http_url="http://127.0.0.1:1", grpc_target="127.0.0.1:2",
                            uds=str(run_dir / "http.sock"), grpc_uds=sock))

    def wait_until(self, record: ProcessRecord, check: Any, *, what: str, **_: Any) -> None:
        self.note(f"wait {what}")

    def stop(self, record: ProcessRecord) -> None:
        self.stopped.append(record.name)


@pytest.fixture
def fakes(monkeypatch: pytest.MonkeyPatch) -> _Recorder:
    rec = _Recorder(workers=2)
    monkeypatch.setattr(spark_cluster, "spark_class", lambda: Path("/bin/spark-class"))
    monkeypatch.setattr(spark_cluster.processes, "spawn", rec.spawn)
    monkeypatch.setattr(spark_cluster.processes, "wait_until", rec.wait_until)
    monkeypatch.setattr(spark_cluster.processes, "stop", rec.stop)
    monkeypatch.setattr(spark_cluster, "start_gateway", rec.start_gateway)
    return rec


def _info() -> Any:
    class _Warehouse:
        name = "demo"

    class _Info:
        warehouse = _Warehouse()

    return _Info()


def test_the_master_starts_first_and_the_gateways_start_at_once(
    tmp_path: Path, fakes: _Recorder
) -> None:
    cluster = SparkCluster(tmp_path, _info(), workers=2)
    cluster.start()
    events = fakes.events
    assert events[0] == "spawn spark-master"
    starting = [i for i, e in enumerate(events) if e.endswith("starting")]
    ready = [i for i, e in enumerate(events) if e.endswith("ready")]
    assert len(starting) == 2
    assert max(starting) < min(ready)  # both were starting before either was ready
    # The workers need the master up and their node's gateway: after both.
    master_up = events.index("wait Spark master")
    assert master_up > max(ready)
    workers = [i for i, e in enumerate(events) if e.startswith("spawn spark-worker")]
    assert len(workers) == 2
    assert min(workers) > master_up
    assert events[-1] == "wait Spark workers"
    assert [n.name for n in cluster.nodes] == ["node-1", "node-2"]
    cluster.stop()
    assert set(fakes.stopped) == {"spark-master", "spark-worker-1", "spark-worker-2",
                                  "gw-node-1", "gw-node-2"}
