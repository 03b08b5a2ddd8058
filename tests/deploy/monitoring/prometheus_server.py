"""A real Prometheus (Debian's `prometheus` binary) on loopback, for the scrape integration test.

Started in a temporary directory with its own config and TSDB, on a free 127.0.0.1 port, and
stopped by its pid. Every wait is bounded.
"""

from __future__ import annotations

import shutil
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import yaml

from devstack.ports import free_port


class PrometheusStartError(RuntimeError):
    """Prometheus exited or did not become ready in time (message carries its log tail)."""


@dataclass(frozen=True)
class RunningPrometheus:
    url: str
    pid: int

    def query(self, promql: str) -> list[dict[str, Any]]:
        """Instant query through the HTTP API; the `result` vector."""
        resp = httpx.get(f"{self.url}/api/v1/query", params={"query": promql}, timeout=5)
        resp.raise_for_status()
        body = resp.json()
        assert body["status"] == "success", body
        return list(body["data"]["result"])


@contextmanager
def prometheus(
    target: str, work_dir: Path, *, ready_timeout_s: float = 30.0
) -> Iterator[RunningPrometheus]:
    """Run Prometheus scraping `target` (host:port) every second; stop it by pid on exit."""
    exe = shutil.which("prometheus")
    if exe is None:
        raise FileNotFoundError("prometheus not installed: `make prometheus-bin`")
    port = free_port()
    config = {
        "global": {"scrape_interval": "1s", "scrape_timeout": "1s", "evaluation_interval": "1s"},
        "scrape_configs": [
            {
                "job_name": "lakegate",
                "metrics_path": "/metrics",
                "static_configs": [{"targets": [target]}],
            }
        ],
    }
    (work_dir / "prometheus.yml").write_text(yaml.safe_dump(config))
    log = (work_dir / "prometheus.log").open("wb")
    proc = subprocess.Popen(
        [
            exe,
            f"--config.file={work_dir / 'prometheus.yml'}",
            f"--storage.tsdb.path={work_dir / 'data'}",
            f"--web.listen-address=127.0.0.1:{port}",
            "--storage.tsdb.retention.time=1h",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
        cwd=work_dir,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + ready_timeout_s
        while True:
            if proc.poll() is not None:
                raise PrometheusStartError(_tail(work_dir))
            try:
                if httpx.get(f"{url}/-/ready", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                raise PrometheusStartError(_tail(work_dir))
            time.sleep(0.2)
        yield RunningPrometheus(url=url, pid=proc.pid)
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=5)
        log.close()


def _tail(work_dir: Path) -> str:
    lines = (work_dir / "prometheus.log").read_text(errors="replace").splitlines()
    return "\n".join(lines[-20:])
