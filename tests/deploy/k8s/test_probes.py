"""The exec probes and the image HEALTHCHECK really work against a running gateway (integration).

The sidecar template and the Dockerfile probe loopback with a Python one-liner (kubelet cannot
reach a loopback-only gateway). This runs those exact commands, with only the port swapped for
the local stack's gateway: they succeed on a live gateway and fail when nothing listens.
"""

from __future__ import annotations

import subprocess
import sys
from typing import Any
from urllib.parse import urlsplit

import pytest

from devstack.ports import free_port
from tests.deploy.dockerfile import parse
from tests.deploy.manifests import DEPLOY, K8S, containers, is_gateway, load_docs, pod_spec

pytestmark = [pytest.mark.integration, pytest.mark.deploy]

DEFAULT = "127.0.0.1:8765"


def _probe_commands() -> dict[str, list[str]]:
    (template,) = load_docs(K8S / "spark/executor-pod-template-sidecar.yaml")
    spec = pod_spec(template)
    assert spec is not None
    (gateway,) = [c for _, c in containers(spec) if is_gateway(c)]
    commands = {
        kind: list(gateway[kind]["exec"]["command"])
        for kind in ("startupProbe", "livenessProbe", "readinessProbe")
    }
    health = parse(DEPLOY / "Dockerfile")[-1].of("HEALTHCHECK")[0].exec_form()
    assert health is not None
    commands["HEALTHCHECK"] = health
    return commands


def _run(command: list[str], target: str) -> int:
    argv = [arg.replace(DEFAULT, target) for arg in command]
    assert argv[0] == "python"
    # The image's `python` is the venv's; here that is the interpreter running the tests.
    done = subprocess.run([sys.executable, *argv[1:]], capture_output=True, timeout=30, check=False)
    return done.returncode


@pytest.mark.parametrize(
    "probe", ["startupProbe", "livenessProbe", "readinessProbe", "HEALTHCHECK"]
)
def test_probe_succeeds_against_a_live_gateway(devstack: Any, probe: str) -> None:
    url = devstack.info.gateway_url
    if not url:
        pytest.skip("the local stack runs without a gateway (gateway.app not importable yet)")
    assert _run(_probe_commands()[probe], urlsplit(url).netloc) == 0


@pytest.mark.parametrize("probe", ["livenessProbe", "readinessProbe", "HEALTHCHECK"])
def test_probe_fails_when_nothing_listens(probe: str) -> None:
    assert _run(_probe_commands()[probe], f"127.0.0.1:{free_port()}") != 0
