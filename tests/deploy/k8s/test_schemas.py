"""Every Kubernetes object we ship validates offline against the Kubernetes JSON schemas.

`kubernetes-validate` bundles the schemas of each release, so this needs no cluster and no
network. Strict mode rejects unknown fields (a typo such as `readOnlyRootFileSystem` would
otherwise be silently ignored by the API server). Checked against the oldest release the
manifests support (native sidecars: 1.29+, we say 1.30) and the newest bundled one.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest

from tests.deploy.manifests import (
    CUSTOM_KINDS,
    K8S,
    OVERLAYS,
    KustomizeUnavailableError,
    k8s_manifest_files,
    load_docs,
    render,
)

pytestmark = pytest.mark.deploy

MIN_KUBERNETES = "1.30.0"
VERSIONS = (MIN_KUBERNETES, kubernetes_validate.latest_version())

Doc = dict[str, Any]


def _objects() -> list[tuple[str, Doc]]:
    out = []
    for path in k8s_manifest_files():
        for i, doc in enumerate(load_docs(path)):
            if doc.get("kind") not in CUSTOM_KINDS:
                out.append((f"{path.relative_to(K8S.parent)}#{i}", doc))
    return out


OBJECTS = _objects()


def _validate(doc: Doc, version: str) -> None:
    try:
        kubernetes_validate.validate(doc, version, strict=True)
    except kubernetes_validate.ValidationError as exc:
        pytest.fail(f"{doc.get('kind')}/{doc.get('metadata', {}).get('name')}: {exc.message}")


def test_the_manifests_include_every_expected_kind() -> None:
    kinds = {doc["kind"] for _, doc in OBJECTS}
    expected = {
        "DaemonSet", "Pod", "ServiceAccount", "Secret", "Namespace", "Service",
        "PriorityClass", "ClusterRoleBinding", "NetworkPolicy",
    }
    assert expected <= kinds
    # ConfigMaps are generated (configMapGenerator): they exist only in the rendered overlays.
    try:
        rendered = {d["kind"] for overlay in OVERLAYS for d in render(K8S / "overlays" / overlay)}
    except KustomizeUnavailableError as exc:
        pytest.skip(str(exc))
    assert "ConfigMap" in rendered


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize(("name", "doc"), OBJECTS, ids=[n for n, _ in OBJECTS])
def test_shipped_object_validates_against_kubernetes_schema(
    name: str, doc: Doc, version: str
) -> None:
    _validate(doc, version)


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_rendered_overlay_validates_against_kubernetes_schema(overlay: str) -> None:
    try:
        docs = render(K8S / "overlays" / overlay)
    except KustomizeUnavailableError as exc:
        pytest.skip(str(exc))
    assert docs
    for doc in docs:
        _validate(doc, MIN_KUBERNETES)


def test_validation_rejects_a_misspelled_field() -> None:
    (doc,) = load_docs(K8S / "overlays/daemonset/daemonset.yaml")
    ctx = doc["spec"]["template"]["spec"]["containers"][0]["securityContext"]
    ctx["readOnlyRootFileSystem"] = ctx.pop("readOnlyRootFilesystem")
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(doc, MIN_KUBERNETES, strict=True)


def test_validation_rejects_a_wrong_type() -> None:
    (doc,) = load_docs(Path(K8S / "spark/executor-pod-template-sidecar.yaml"))
    doc["spec"]["initContainers"][0]["ports"] = "8765"
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(doc, MIN_KUBERNETES, strict=True)
