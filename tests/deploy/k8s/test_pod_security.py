"""Every pod we ship passes the restricted-style scan; the scan catches each insecure setting."""

from __future__ import annotations

import copy
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.deploy.k8s.pod_security import Finding, scan_pod, scan_restricted
from tests.deploy.manifests import (
    K8S,
    containers,
    is_gateway,
    k8s_manifest_files,
    load_docs,
    pod_spec,
)

pytestmark = pytest.mark.deploy

Doc = dict[str, Any]


def _shipped_pods() -> list[tuple[str, Doc]]:
    pods = []
    for path in k8s_manifest_files():
        for doc in load_docs(path):
            spec = pod_spec(doc)
            if spec is not None:
                pods.append((str(path.relative_to(K8S.parent.parent)), spec))
    return pods


SHIPPED = _shipped_pods()


def test_every_variant_ships_a_pod_spec_to_scan() -> None:
    names = {name for name, _ in SHIPPED}
    assert "deploy/k8s/overlays/daemonset/daemonset.yaml" in names
    assert "deploy/k8s/spark/executor-pod-template-sidecar.yaml" in names
    assert "deploy/k8s/spark/executor-pod-template-daemonset.yaml" in names


@pytest.mark.parametrize(("name", "spec"), SHIPPED, ids=[n for n, _ in SHIPPED])
def test_shipped_pod_passes_the_security_scan(name: str, spec: Doc) -> None:
    assert scan_pod(spec, name) == []


@pytest.mark.parametrize(
    "path",
    ["overlays/daemonset/daemonset.yaml", "spark/executor-pod-template-sidecar.yaml"],
)
def test_gateway_container_present_and_probed_in_each_variant(path: str) -> None:
    (doc,) = load_docs(K8S / path)
    spec = pod_spec(doc)
    assert spec is not None
    gateways = [c for _, c in containers(spec) if is_gateway(c)]
    assert len(gateways) == 1
    assert gateways[0]["livenessProbe"]
    assert gateways[0]["readinessProbe"]


# --- the scanner itself: a clean pod passes, and each insecure change is reported -------------


def _secure_pod() -> Doc:
    return {
        "automountServiceAccountToken": False,
        "securityContext": {
            "runAsNonRoot": True,
            "runAsUser": 10001,
            "seccompProfile": {"type": "RuntimeDefault"},
        },
        "containers": [
            {
                "name": "lakegate",
                "image": "lakegate/lakegate:0.1.0",
                "args": ["serve"],
                "securityContext": {
                    "allowPrivilegeEscalation": False,
                    "readOnlyRootFilesystem": True,
                    "capabilities": {"drop": ["ALL"]},
                },
                "resources": {
                    "requests": {"cpu": "100m", "memory": "128Mi"},
                    "limits": {"memory": "256Mi"},
                },
                "livenessProbe": {"httpGet": {"path": "/livez", "port": 8765}},
                "readinessProbe": {"httpGet": {"path": "/readyz", "port": 8765}},
            }
        ],
        "volumes": [{"name": "s", "hostPath": {"path": "/var/run/lakegate"}}],
    }


def _gw(pod: Doc) -> Doc:
    return pod["containers"][0]


def _root_init(pod: Doc, caps: list[str]) -> None:
    pod["initContainers"] = [
        {
            "name": "socket-dir",
            "image": "lakegate/lakegate:0.1.0",
            "securityContext": {
                "runAsUser": 0,
                "runAsNonRoot": False,
                "allowPrivilegeEscalation": False,
                "readOnlyRootFilesystem": True,
                "capabilities": {"drop": ["ALL"], "add": caps},
            },
            "resources": {
                "requests": {"cpu": "10m", "memory": "16Mi"},
                "limits": {"memory": "32Mi"},
            },
        }
    ]


MUTATIONS: list[tuple[str, Callable[[Doc], object], str]] = [
    ("host network", lambda p: p.update(hostNetwork=True), "hostNetwork"),
    ("host pid", lambda p: p.update(hostPID=True), "hostPID"),
    (
        "token mounted",
        lambda p: p.pop("automountServiceAccountToken"),
        "automountServiceAccountToken",
    ),
    (
        "other hostPath",
        lambda p: p["volumes"].append({"name": "d", "hostPath": {"path": "/"}}),
        "hostPath",
    ),
    ("privileged", lambda p: _gw(p)["securityContext"].update(privileged=True), "privileged"),
    (
        "escalation unset",
        lambda p: _gw(p)["securityContext"].pop("allowPrivilegeEscalation"),
        "allowPrivilegeEscalation",
    ),
    ("caps kept", lambda p: _gw(p)["securityContext"].pop("capabilities"), "capabilities.drop"),
    (
        "cap added",
        lambda p: _gw(p)["securityContext"]["capabilities"].update(add=["NET_ADMIN"]),
        "capabilities.add",
    ),
    ("root user", lambda p: _gw(p)["securityContext"].update(runAsUser=0), "runAsNonRoot"),
    ("non-root unset", lambda p: p["securityContext"].pop("runAsNonRoot"), "runAsNonRoot"),
    ("no seccomp", lambda p: p["securityContext"].pop("seccompProfile"), "seccompProfile"),
    (
        "writable root",
        lambda p: _gw(p)["securityContext"].update(readOnlyRootFilesystem=False),
        "readOnlyRootFilesystem",
    ),
    ("no limits", lambda p: _gw(p)["resources"].pop("limits"), "resources"),
    ("latest image", lambda p: _gw(p).update(image="lakegate/lakegate:latest"), "image.tag"),
    ("untagged image", lambda p: _gw(p).update(image="lakegate/lakegate"), "image.tag"),
    (
        "liveness elsewhere",
        lambda p: _gw(p)["livenessProbe"]["httpGet"].update(path="/"),
        "livenessProbe",
    ),
    ("no readiness", lambda p: _gw(p).pop("readinessProbe"), "readinessProbe"),
    (
        "root init with more caps",
        lambda p: _root_init(p, ["CHOWN", "SYS_ADMIN"]),
        "capabilities.add",
    ),
]


def test_scan_accepts_the_secure_pod_and_the_narrow_root_init() -> None:
    pod = _secure_pod()
    assert scan_pod(pod, "p") == []
    _root_init(pod, ["CHOWN"])
    assert scan_pod(pod, "p") == []


@pytest.mark.parametrize(
    ("change", "rule"), [(m[1], m[2]) for m in MUTATIONS], ids=[m[0] for m in MUTATIONS]
)
def test_scan_reports_each_insecure_setting(change: Callable[[Doc], object], rule: str) -> None:
    pod = copy.deepcopy(_secure_pod())
    change(pod)
    assert rule in {f.rule for f in scan_pod(pod, "p")}


def test_root_init_with_more_capabilities_also_counts_as_root() -> None:
    pod = _secure_pod()
    _root_init(pod, ["CHOWN", "SYS_ADMIN"])
    rules = {f.rule for f in scan_pod(pod, "p")}
    assert {"capabilities.add", "runAsNonRoot"} <= rules


def test_finding_names_the_container() -> None:
    pod = _secure_pod()
    _gw(pod)["securityContext"]["privileged"] = True
    assert Finding("privileged", "file.yaml/containers/lakegate") in scan_pod(pod, "file.yaml")


def test_manifest_file_list_covers_spark_templates() -> None:
    assert Path(K8S / "spark/executor-pod-template-sidecar.yaml") in k8s_manifest_files()


# --- Pod Security "restricted": the node-local variant and its executor template -------------

RESTRICTED_FILES = (
    "spark/executor-pod-template-nodelocal.yaml",
    "overlays/nodelocal/daemonset.yaml",
)


@pytest.mark.parametrize("path", RESTRICTED_FILES)
def test_nodelocal_pods_meet_pod_security_restricted(path: str) -> None:
    (doc,) = load_docs(K8S / path)
    spec = pod_spec(doc)
    assert spec is not None
    assert scan_restricted(spec, path) == []
    assert scan_pod(spec, path) == []


def test_nodelocal_namespace_enforces_restricted() -> None:
    (ns,) = load_docs(K8S / "overlays/nodelocal/namespace.yaml")
    assert ns["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "restricted"


def test_hostpath_variants_are_not_restricted() -> None:
    """The reason the node-local variant exists: the hostPath pods fail "restricted"."""
    for path in ("spark/executor-pod-template-daemonset.yaml", "overlays/daemonset/daemonset.yaml"):
        (doc,) = load_docs(K8S / path)
        spec = pod_spec(doc)
        assert spec is not None
        assert "volumeType" in {f.rule for f in scan_restricted(spec, path)}


def test_nodelocal_executor_mounts_an_audience_bound_expiring_token() -> None:
    (doc,) = load_docs(K8S / "spark/executor-pod-template-nodelocal.yaml")
    spec = pod_spec(doc)
    assert spec is not None
    assert spec["automountServiceAccountToken"] is False
    tokens = [
        s["serviceAccountToken"]
        for v in spec["volumes"]
        for s in (v.get("projected") or {}).get("sources", [])
        if "serviceAccountToken" in s
    ]
    assert len(tokens) == 1
    assert tokens[0]["audience"]
    assert tokens[0]["expirationSeconds"] >= 600


RESTRICTED_MUTATIONS: list[tuple[str, Callable[[Doc], object], str]] = [
    (
        "socket hostPath",
        lambda p: p["volumes"].append({"name": "s", "hostPath": {"path": "/var/run/lakegate"}}),
        "volumeType",
    ),
    (
        "root init with CHOWN",
        lambda p: _root_init(p, ["CHOWN"]),
        "capabilities.add",
    ),
    (
        "NET_RAW added",
        lambda p: _gw(p)["securityContext"]["capabilities"].update(add=["NET_RAW"]),
        "capabilities.add",
    ),
    (
        "host port",
        lambda p: _gw(p).update(ports=[{"containerPort": 80, "hostPort": 80}]),
        "hostPort",
    ),
    ("non-root unset", lambda p: p["securityContext"].pop("runAsNonRoot"), "runAsNonRoot"),
    (
        "unconfined seccomp",
        lambda p: p["securityContext"].update(seccompProfile={"type": "Unconfined"}),
        "seccompProfile",
    ),
    (
        "escalation allowed",
        lambda p: _gw(p)["securityContext"].update(allowPrivilegeEscalation=True),
        "allowPrivilegeEscalation",
    ),
    (
        "unmasked proc",
        lambda p: _gw(p)["securityContext"].update(procMount="Unmasked"),
        "procMount",
    ),
]


def _restricted_pod() -> Doc:
    pod = _secure_pod()
    pod["volumes"] = [{"name": "t", "projected": {"sources": []}}]
    return pod


def test_restricted_scan_accepts_the_secure_pod() -> None:
    assert scan_restricted(_restricted_pod(), "p") == []


@pytest.mark.parametrize(
    ("change", "rule"),
    [(m[1], m[2]) for m in RESTRICTED_MUTATIONS],
    ids=[m[0] for m in RESTRICTED_MUTATIONS],
)
def test_restricted_scan_reports_each_violation(change: Callable[[Doc], object], rule: str) -> None:
    pod = copy.deepcopy(_restricted_pod())
    change(pod)
    assert rule in {f.rule for f in scan_restricted(pod, "p")}
