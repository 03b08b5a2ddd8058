"""Where the demo's Spark job runs: a local standalone cluster (default) or ``local[N]``.

Why one object for both: the pipeline, the report and the summary only need the master URL, the
nodes (name and gateway), the settings of the session and how many executors each node runs. On
the cluster every node has its own gateway and its executors find it through the worker's
environment; in ``local[N]`` the stack's single gateway is the only node.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from demo.progress import Progress
from devstack.stack_info import StackInfo

if TYPE_CHECKING:
    from devstack.spark_cluster import SparkCluster

STANDALONE = "standalone"
# The demo's JVMs (driver, executors) live two minutes on a small machine: the client compiler
# alone and one GC thread start them and run the first jobs in about half the time C2's
# compile threads take to pay off (measured: session 13-18 s against 36-62 s on the loaded 2-core
# machine). What the demo shows does not change.
JVM_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
JVM_CONF = {"spark.driver.extraJavaOptions": JVM_OPTIONS,
            "spark.executor.extraJavaOptions": JVM_OPTIONS}


@dataclass
class Runtime:
    """The master, the nodes (name → gateway HTTP URL) and the driver's gateway URL."""

    master: str
    gateways: dict[str, str]
    driver_url: str
    conf: dict[str, str] = field(default_factory=dict)
    cluster: SparkCluster | None = None

    def executors_per_node(self) -> dict[str, int]:
        """Executors each node runs now (local mode: one JVM holds everything)."""
        if self.cluster is None:
            return dict.fromkeys(self.gateways, 1)
        return {node.name: node.executors() for node in self.cluster.nodes}


@contextmanager
def runtime(
    master: str,
    info: StackInfo,
    run_dir: Path,
    *,
    nodes: int,
    transport: str,
    say: Progress,
) -> Iterator[Runtime]:
    """Start what ``master`` needs (cluster and per-node gateways) and stop it again on exit.

    ``info`` is the running stack's stack.json; in local mode it must include its gateway.
    The driver process itself talks to node-1's gateway (the node the driver "runs on").
    """
    if master != STANDALONE:
        from devstack.spark_cluster import task_url

        if info.gateway is None:
            raise RuntimeError(f"--master {master} needs the stack's own gateway")
        url = task_url(info.gateway, transport)
        os.environ["LAKEGATE_URL"] = url  # local[N]: Python workers inherit the driver's env
        yield Runtime(master, {"local": info.gateway_url}, url, dict(JVM_CONF))
        return
    from devstack.spark_cluster import SparkCluster

    # The node environment names the warehouse the demo runs on (demo, demo_adls, demo_gcs).
    cluster = SparkCluster(run_dir, info, workers=nodes, transport=transport,
                           warehouse=os.environ.get("LAKEGATE_WAREHOUSE"))
    say(f"starting a Spark standalone cluster: 1 master, {nodes} workers, one gateway per node")
    with cluster:
        driver_url = cluster.nodes[0].lakegate_url
        os.environ["LAKEGATE_URL"] = driver_url  # the driver's own node
        for node in cluster.nodes:
            say(f"{node.name}: worker pid {node.worker.pid}, gateway {node.gateway_http_url}, "
                f"tasks use LAKEGATE_URL={node.lakegate_url}")
        yield Runtime(
            cluster.master_url,
            {n.name: n.gateway_http_url for n in cluster.nodes},
            driver_url,
            {**cluster.spark_conf(), **JVM_CONF},
            cluster,
        )
        say("stopping the Spark cluster and the node gateways")
