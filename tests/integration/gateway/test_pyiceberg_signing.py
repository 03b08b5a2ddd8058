"""pyiceberg (FsspecFileIO + S3V4RestSigner, unchanged) reads and writes through the node's signer.

On both kinds of warehouse of the real stack: `demo` (STS: the gateway signs locally, the
catalog sees no sign request) and `demo_signing` (STS off: the gateway forwards each checked
request to the catalog's signer). Rows are checked exactly, and the node's sign counter must
grow, so a silent unsigned fallback (pyiceberg issue 3625, see s3fs_overlay.py) cannot pass:
SeaweedFS refuses unsigned requests, and a request signed elsewhere is not counted here.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest

from devstack.metrics_scrape import delta, scrape
from devstack.s3fs_overlay import REPO_ROOT, overlay
from devstack.stack_info import StackInfo

pytestmark = pytest.mark.integration

PROBE = Path(__file__).with_name("pyiceberg_probe.py")
PROBE_TIMEOUT_S = 240


def _probe(info: StackInfo, warehouse: str) -> dict[str, Any]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(overlay()), str(REPO_ROOT)])}
    name = f"pysig_{uuid.uuid4().hex[:8]}"
    proc = subprocess.run(
        [sys.executable, str(PROBE), info.gateway_url, warehouse, info.namespace, name],
        capture_output=True, text=True, env=env, timeout=PROBE_TIMEOUT_S, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    return out


@pytest.mark.parametrize(("storage", "mode"), [("s3", "local"), ("s3-signing", "forwarded")])
def test_pyiceberg_writes_and_reads_through_the_nodes_signer(
    info: StackInfo, emulator: Any, storage: str, mode: str,
) -> None:
    before = scrape(info.gateway_url)
    emulator.reset()
    out = _probe(info, info.warehouse_for(storage).name)
    after = scrape(info.gateway_url)
    assert out["ids"] == [1, 1, 2, 3]
    assert out["io"] == "FsspecFileIO"
    assert out["keys"] == []  # no key ever reached the client
    assert out["s3fs"] == "2026.1.0"
    signed = delta(before, after, "lakegate_sign_requests_total", mode=mode)
    assert signed >= 8  # manifests, manifest lists, data files: written and read back
    assert delta(before, after, "lakegate_sign_requests_total", mode="refused") == 0
    catalog_signed = emulator.stats().get("signed", 0)
    assert catalog_signed == (signed if mode == "forwarded" else 0)
