"""Where the deployment artefacts live, and how tests read and render them.

Every deploy test reads files through here, so a moved file breaks one place. Rendering the
kustomize overlays needs a kustomize binary (`kubectl kustomize`, or `kustomize build`); without
one, the render fixtures skip with that reason and the raw-file tests still run.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

REPO_ROOT = Path(__file__).resolve().parents[2]
DEPLOY = REPO_ROOT / "deploy"
K8S = DEPLOY / "k8s"
MONITORING = DEPLOY / "monitoring"
OVERLAYS = ("daemonset", "nodelocal", "sidecar")
# Kinds without a namespace (the namespace transformer leaves them alone).
CLUSTER_KINDS = frozenset({"Namespace", "PriorityClass", "ClusterRoleBinding", "ClusterRole"})
# configMapGenerator inputs that happen to be YAML: data, not Kubernetes objects.
GENERATOR_INPUTS = frozenset({"policy.yaml"})
# Custom resources: no schema in kubernetes-validate; tests check their structure instead.
CUSTOM_KINDS = frozenset({"PodMonitor", "PrometheusRule", "SparkApplication"})
GATEWAY_IMAGE = "lakegate/lakegate"

Doc = dict[str, Any]


class KustomizeUnavailableError(RuntimeError):
    """No kustomize binary on this machine (neither `kubectl kustomize` nor `kustomize`)."""


def load_docs(path: Path) -> list[Doc]:
    """All non-empty YAML documents of one file."""
    with path.open(encoding="utf-8") as fh:
        return [d for d in yaml.safe_load_all(fh) if d]


def k8s_manifest_files() -> list[Path]:
    """Every Kubernetes object file we ship (kustomization files are build inputs, not objects)."""
    files = sorted(K8S.rglob("*.yaml")) + sorted(MONITORING.glob("*.yaml"))
    return [
        f
        for f in files
        if f.name != "kustomization.yaml"
        and f.name not in {"alerts.yaml", "prometheus.yaml", "alerts_test.yaml"}
        and not (f.parent.is_relative_to(K8S) and f.name in GENERATOR_INPUTS)
        and not f.name.endswith("-patch.yaml")
    ]


def kustomize_command() -> list[str]:
    """The kustomize invocation available here, preferring the one bundled in kubectl."""
    if shutil.which("kubectl"):
        return ["kubectl", "kustomize"]
    if shutil.which("kustomize"):
        return ["kustomize", "build"]
    raise KustomizeUnavailableError(
        "no kustomize binary: install kubectl (bundles kustomize) or kustomize to render overlays"
    )


def render(directory: Path) -> list[Doc]:
    """`kustomize build` of one directory, parsed."""
    out = subprocess.run(
        [*kustomize_command(), str(directory)],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return [d for d in yaml.safe_load_all(out.stdout) if d]


def pod_spec(doc: Doc) -> Doc | None:
    """The pod spec inside a workload or Pod document, or None for non-workloads."""
    kind = doc.get("kind")
    if kind == "Pod":
        return doc.get("spec")
    if kind in {"DaemonSet", "Deployment", "StatefulSet", "ReplicaSet", "Job"}:
        return doc["spec"]["template"]["spec"]
    if kind == "CronJob":
        return doc["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    return None


def containers(spec: Doc) -> Iterator[tuple[str, Doc]]:
    """(`containers` | `initContainers`, container) pairs of one pod spec."""
    for field in ("initContainers", "containers"):
        for c in spec.get(field) or []:
            yield field, c


def is_gateway(container: Doc) -> bool:
    """Whether a container runs the Lakegate gateway itself (not its init step or an executor)."""
    image = str(container.get("image", ""))
    return image.split(":")[0].endswith(GATEWAY_IMAGE) and "serve" in (container.get("args") or [])


def exprs(node: Any) -> Iterator[str]:
    """Every `expr` string in a rule file or dashboard document (any depth)."""
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "expr" and isinstance(value, str):
                yield value
            else:
                yield from exprs(value)
    elif isinstance(node, list):
        for item in node:
            yield from exprs(item)
