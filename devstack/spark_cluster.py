"""A local Spark standalone cluster: one master and N workers, each worker one "node" with its own
Lakegate gateway.

Why this shape: in production every node runs a gateway (a DaemonSet) and the executors on that
node find it through an environment variable set from the downward API. Here each Spark Worker
JVM is started with ``LAKEGATE_URL`` pointing at its own gateway's Unix socket; standalone
executors inherit the Worker's environment and their Python workers inherit the executor's, so a
task reaches its own node's gateway without any ``spark.executorEnv`` setting in the application.
Everything binds to 127.0.0.1 on free ports and is stopped by pid (process group), also when
starting fails half-way.
"""

from __future__ import annotations

import os
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from devstack import processes
from devstack.errors import ShutdownError, StartupError
from devstack.gateway_proc import start_gateway
from devstack.ports import free_ports
from devstack.processes import ProcessRecord
from devstack.readiness import http_ok
from devstack.stack_info import GatewayInfo, StackInfo

READY_TIMEOUT_S = 60.0
DAEMON_MEMORY = "256m"  # master and worker daemons (executors get spark.executor.memory)
# The master and worker daemons only schedule: the client compiler alone (no C2 compile threads
# competing for the machine's cores while everything starts) and one GC thread start them sooner.
DAEMON_JAVA_OPTS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
_MASTER = "org.apache.spark.deploy.master.Master"
_WORKER = "org.apache.spark.deploy.worker.Worker"


def spark_class() -> Path:
    """The ``spark-class`` launcher of the PySpark distribution installed in this venv."""
    import pyspark

    path = Path(pyspark.__file__).parent / "bin" / "spark-class"
    if not path.exists():
        raise StartupError(f"{path} not found: is PySpark installed in {sys.prefix}?")
    return path


def task_url(gateway: GatewayInfo, transport: str) -> str:
    """``LAKEGATE_URL`` for a gateway: ``grpc`` / ``http`` over its Unix sockets, or ``tcp``
    (HTTP over loopback TCP, which AWS SDKs need for the container-credentials endpoint)."""
    if transport == "grpc":
        return f"grpc+unix:{gateway.grpc_uds}"
    if transport == "http":
        return f"unix:{gateway.uds}"
    if transport == "tcp":
        return gateway.http_url
    raise ValueError(f"unknown transport {transport!r} (grpc, http or tcp)")


@dataclass(frozen=True)
class SparkNode:
    """One worker ("node") and the gateway that serves the executors on it."""

    name: str
    worker: ProcessRecord
    worker_ui: str
    gateway: ProcessRecord
    gateway_info: GatewayInfo
    lakegate_url: str  # what the node's tasks see as $LAKEGATE_URL

    @property
    def gateway_http_url(self) -> str:
        return self.gateway_info.http_url

    def executors(self) -> int:
        """Executors this worker runs now (read from the worker's own JSON status page)."""
        with httpx.Client(timeout=5.0, trust_env=False) as http:
            answer = http.get(f"{self.worker_ui}/json/")
            answer.raise_for_status()
        return len(answer.json().get("executors", []))


@dataclass
class SparkCluster:
    """Master + ``workers`` workers + one gateway per worker; ``start()`` then ``stop()``.

    ``stack_info`` is the running local stack's stack.json (the gateways log in to its IdP and
    call its catalog). ``transport`` picks the URL tasks use (see ``task_url``).
    ``distinct_hosts``: worker ``i`` binds to loopback address ``127.0.0.<i>`` instead of
    127.0.0.1, so Spark sees one host per worker. Why: the scheduler never launches a
    speculative copy of a task on a host that already ran an attempt of it, so speculation
    needs two hosts (``local-cluster`` and ``local[N]`` run every executor on one host).
    """

    run_dir: Path
    stack_info: StackInfo
    workers: int = 2
    cores_per_worker: int = 1
    worker_memory: str = "1g"
    transport: str = "grpc"
    gateway_env: dict[str, str] = field(default_factory=dict)
    distinct_hosts: bool = False
    # The warehouse tasks use by default (None: the stack's S3 warehouse, `demo`).
    warehouse: str | None = None
    master_url: str = ""
    master_ui: str = ""
    nodes: list[SparkNode] = field(default_factory=list)
    _records: list[ProcessRecord] = field(default_factory=list)

    def __enter__(self) -> SparkCluster:
        self.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def start(self) -> None:
        """Start gateways, master and workers; return once every worker registered."""
        if self.workers < 1:
            raise ValueError("a cluster needs at least one worker")
        self.run_dir = Path(self.run_dir).resolve()
        try:
            self._start()
        except BaseException:
            self.stop()
            raise

    def _start(self) -> None:
        """The master's JVM first: it starts while the gateways start (all of them at once), so
        the cluster is up after the slower of the two, not after their sum; the workers need
        both (the master to register with, their node's gateway for LAKEGATE_URL)."""
        master_port, master_ui_port = free_ports(2)
        self.master_url = f"spark://127.0.0.1:{master_port}"
        self.master_ui = f"http://127.0.0.1:{master_ui_port}"
        master = self._spawn(
            "spark-master",
            [_MASTER, "--host", "127.0.0.1", "--port", str(master_port),
             "--webui-port", str(master_ui_port)],
            self.run_dir / "spark" / "master.log",
            {},
        )
        with ThreadPoolExecutor(max_workers=self.workers,
                                thread_name_prefix="gateway-start") as pool:
            # Each start is bounded (READY_TIMEOUT_S); leaving the block waits for all of them,
            # so every gateway that did start is in _records before a failure propagates.
            starting = [pool.submit(self._start_gateway, i) for i in range(1, self.workers + 1)]
        gateways = [f.result() for f in starting]
        processes.wait_until(
            master, lambda: http_ok(f"{self.master_ui}/json/"),
            timeout_s=READY_TIMEOUT_S, what="Spark master", interval_s=0.2,
        )
        for index, (gw_record, gw_info) in enumerate(gateways, start=1):
            self.nodes.append(self._start_worker(index, gw_record, gw_info))
        processes.wait_until(
            master, self._all_registered,
            timeout_s=READY_TIMEOUT_S, what="Spark workers", interval_s=0.2,
        )

    def _start_gateway(self, index: int) -> tuple[ProcessRecord, GatewayInfo]:
        node_dir = self.run_dir / f"node-{index}"
        node_dir.mkdir(parents=True, exist_ok=True)
        record, info = start_gateway(node_dir, self.stack_info, extra_env=self.gateway_env,
                                     timeout_s=READY_TIMEOUT_S)
        self._records.append(record)
        return record, info

    def _start_worker(
        self, index: int, gw_record: ProcessRecord, gw_info: GatewayInfo
    ) -> SparkNode:
        name = f"node-{index}"
        node_dir = self.run_dir / name
        port, ui_port = free_ports(2)
        url = task_url(gw_info, self.transport)
        host = f"127.0.0.{index}" if self.distinct_hosts else "127.0.0.1"
        # The DaemonSet picture: the node's environment names the node's gateway.
        env = {
            "SPARK_LOCAL_IP": host,  # the worker's executors bind (and register) there too
            "LAKEGATE_URL": url,
            "LAKEGATE_WAREHOUSE": self.warehouse or self.stack_info.warehouse.name,
            "SPARK_WORKER_DIR": str(node_dir / "work"),
        }
        record = self._spawn(
            f"spark-worker-{index}",
            [_WORKER, "--host", host, "--port", str(port), "--webui-port", str(ui_port),
             "--cores", str(self.cores_per_worker), "--memory", self.worker_memory,
             "--work-dir", str(node_dir / "work"), self.master_url],
            node_dir / "worker.log",
            env,
        )
        return SparkNode(name, record, f"http://{host}:{ui_port}", gw_record, gw_info, url)

    def _spawn(
        self, name: str, args: list[str], log: Path, env: dict[str, str]
    ) -> ProcessRecord:
        base = {
            "SPARK_LOCAL_IP": "127.0.0.1",
            "SPARK_DAEMON_MEMORY": DAEMON_MEMORY,
            "SPARK_DAEMON_JAVA_OPTS": DAEMON_JAVA_OPTS,
            "SPARK_LOG_DIR": str(self.run_dir / "spark"),
            "PYSPARK_PYTHON": os.environ.get("PYSPARK_PYTHON", sys.executable),
            "PYTHONPATH": _project_root(),
            "LANCE_LOG": "error",
        }
        base.update(env)
        if "LAKEGATE_URL" not in env:  # the master is no node: it must not name a gateway
            base["LAKEGATE_URL"] = ""
        record = processes.spawn(name, [str(spark_class()), *args], log_path=log, env_extra=base)
        self._records.append(record)
        return record

    def _all_registered(self) -> bool:
        try:
            answer = httpx.get(f"{self.master_ui}/json/", timeout=2.0, trust_env=False)
            alive = [w for w in answer.json().get("workers", []) if w.get("state") == "ALIVE"]
        except (httpx.HTTPError, ValueError):
            return False
        return len(alive) >= self.workers

    def spark_conf(self, *, executor_memory: str = "512m") -> dict[str, str]:
        """Session settings for an application on this cluster: one executor per worker.

        Deliberately no ``spark.executorEnv.LAKEGATE_URL``: executors take the node's value.
        """
        return {
            "spark.executor.memory": executor_memory,
            "spark.executor.cores": str(self.cores_per_worker),
            "spark.cores.max": str(self.cores_per_worker * self.workers),
            "spark.deploy.spreadOut": "true",
        }

    def stop(self) -> None:
        """Stop workers, master and gateways (reverse start order); idempotent."""
        errors: list[str] = []
        for record in reversed(self._records):
            try:
                processes.stop(record)
            except Exception as exc:  # noqa: BLE001 - keep stopping the others, report at the end
                errors.append(f"{record.name}: {exc}")
        self._records.clear()
        if errors:
            raise ShutdownError("could not stop: " + "; ".join(errors))


def _project_root() -> str:
    """The repository root, so executors can import the job's own modules (e.g. ``demo``)."""
    return str(Path(__file__).resolve().parent.parent)
