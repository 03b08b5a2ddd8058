"""The demo on a Spark standalone cluster: 2 workers, each a node with its own gateway.

Why a subprocess: a Python process holds one SparkContext, and the other e2e tests share a
``local[2]`` session; the demo also proves it stops everything it started.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import psutil
import pytest

from demo.report import ACCESS_MODES

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
TIMEOUT_S = 240


def _spark_daemons() -> set[int]:
    found = set()
    for proc in psutil.process_iter(["pid", "cmdline"]):
        cmdline = " ".join(proc.info.get("cmdline") or [])
        if "org.apache.spark.deploy" in cmdline and str(ROOT) in cmdline:
            found.add(proc.info["pid"])
    return found


def test_demo_on_a_two_worker_cluster_uses_each_nodes_gateway(tmp_path: Path) -> None:
    before = _spark_daemons()
    summary_path = tmp_path / "summary.json"
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable)
    env.pop("LAKEGATE_URL", None)
    done = subprocess.run(
        [sys.executable, "-m", "demo", "--nodes", "2", "--rows", "800", "--files", "2",
         "--partitions", "6", "--run-dir", str(tmp_path / "run"),
         "--summary-json", str(summary_path)],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=TIMEOUT_S, check=False,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    summary = json.loads(summary_path.read_text())

    assert summary["spark_master"].startswith("spark://127.0.0.1:")
    nodes = summary["nodes"]
    assert [n["name"] for n in nodes] == ["node-1", "node-2"]
    assert len({n["gateway"] for n in nodes}) == 2  # one gateway per node
    tables = summary["tables"]
    assert {t["format"] for t in tables} == {"csv", "parquet", "delta", "lance", "iceberg"}
    bound = len(tables) * ACCESS_MODES
    for node in nodes:
        assert node["executors"] >= 1, node  # an executor JVM ran on every node
        assert node["credential_requests"] >= 1, node  # the node's executors used its gateway
        # One vend per table and access mode on each node, plus one per entry a table change
        # dropped: the event of a create arrives after the new table's first tasks filled the
        # entry on a loaded machine (seen: 0.6 s late, one more vend); an attempt that was not a
        # vend (a 404, a timeout retried) is counted apart. The breakdown is in the message.
        vended = node["upstream_credential_by_status"].get("200", 0)
        assert 1 <= vended <= bound + node["invalidated"], json.dumps(node)
        assert sum(node["upstream_credential_by_status"].values()) == node[
            "upstream_credential_calls"], json.dumps(node)
    for table in tables:
        assert table["rows_read"] == table["rows_written"] > 0, table
    assert summary["tasks"] > summary["catalog_credential_calls"]
    assert summary["idp_token_requests"] >= 1
    assert "node-2" in done.stdout
    assert _spark_daemons() <= before  # master and workers were stopped
