"""The rendered variants hang together: settings the gateway accepts, sockets where executors look.

Renders each overlay with kustomize (the binary bundled in kubectl), then follows the wiring a
reviewer would check by hand: the ConfigMap is a valid gateway configuration (loaded through
the gateway's own `Settings`), secrets and config maps referenced exist, the socket path the
gateway binds is the one executors mount and put in LAKEGATE_URL, images carry the release tag.
"""

from __future__ import annotations

import tomllib
from typing import Any

import pytest

from gateway.settings import Settings, SettingsError
from tests.deploy.manifests import (
    K8S,
    OVERLAYS,
    REPO_ROOT,
    KustomizeUnavailableError,
    containers,
    is_gateway,
    load_docs,
    pod_spec,
    render,
)

pytestmark = pytest.mark.deploy

Doc = dict[str, Any]
SECRET_PLACEHOLDER = "placeholder-secret-value"  # noqa: S105 (a test value)


@pytest.fixture(scope="module", params=OVERLAYS)
def rendered(request: pytest.FixtureRequest) -> tuple[str, list[Doc]]:
    try:
        return request.param, render(K8S / "overlays" / request.param)
    except KustomizeUnavailableError as exc:
        pytest.skip(str(exc))


def _by_kind(docs: list[Doc], kind: str) -> dict[str, Doc]:
    return {d["metadata"]["name"]: d for d in docs if d["kind"] == kind}


def _release() -> str:
    with (REPO_ROOT / "pyproject.toml").open("rb") as fh:
        return str(tomllib.load(fh)["project"]["version"])


def _gateway_pod(variant: str, docs: list[Doc]) -> Doc:
    if variant == "daemonset":
        spec = pod_spec(_by_kind(docs, "DaemonSet")["lakegate"])
    else:
        (template,) = load_docs(K8S / "spark/executor-pod-template-sidecar.yaml")
        spec = pod_spec(template)
    assert spec is not None
    return spec


def _gateway_env(container: Doc, configmaps: dict[str, Doc]) -> dict[str, str]:
    env: dict[str, str] = {}
    for source in container.get("envFrom") or []:
        env.update(configmaps[source["configMapRef"]["name"]]["data"])
    for var in container.get("env") or []:
        env[var["name"]] = var.get("value", SECRET_PLACEHOLDER)
    return env


def _gateway(spec: Doc) -> Doc:
    (gw,) = [c for _, c in containers(spec) if is_gateway(c)]
    return gw


def test_overlay_objects_share_one_namespace(rendered: tuple[str, list[Doc]]) -> None:
    variant, docs = rendered
    expected = {"daemonset": "lakegate", "sidecar": "spark-jobs"}[variant]
    namespaced = [d for d in docs if d["kind"] != "Namespace"]
    assert namespaced
    assert {d["metadata"].get("namespace") for d in namespaced} == {expected}


def test_gateway_configuration_is_accepted_by_the_gateway_settings(
    rendered: tuple[str, list[Doc]],
) -> None:
    variant, docs = rendered
    env = _gateway_env(_gateway(_gateway_pod(variant, docs)), _by_kind(docs, "ConfigMap"))
    settings = Settings.load(environ=env)
    assert settings.token.kind.value == "client_credentials"
    assert settings.token.client_secret is not None
    if variant == "daemonset":
        assert settings.callers.mode.value == "token"
    else:
        assert settings.listen.is_loopback


def test_settings_check_would_reject_an_open_listener_without_caller_auth(
    rendered: tuple[str, list[Doc]],
) -> None:
    variant, docs = rendered
    env = _gateway_env(_gateway(_gateway_pod(variant, docs)), _by_kind(docs, "ConfigMap"))
    open_bind = "0.0.0.0"  # noqa: S104 (the point: this must be refused)
    env |= {"LAKEGATE__LISTEN__HOST": open_bind, "LAKEGATE__CALLERS__MODE": "none"}
    with pytest.raises(SettingsError, match="LAKEGATE__LISTEN__HOST"):
        Settings.load(environ=env)


def test_gateway_image_is_the_released_version(rendered: tuple[str, list[Doc]]) -> None:
    variant, docs = rendered
    images = {c["image"] for _, c in containers(_gateway_pod(variant, docs))}
    assert f"lakegate/lakegate:{_release()}" in images


def test_referenced_secrets_are_documented_by_an_example(rendered: tuple[str, list[Doc]]) -> None:
    variant, docs = rendered
    examples: dict[str, set[str]] = {}
    for path in K8S.rglob("*secret.example.yaml"):
        for doc in load_docs(path):
            examples[doc["metadata"]["name"]] = set(doc["stringData"])
    spec = _gateway_pod(variant, docs)
    refs = {
        (v["valueFrom"]["secretKeyRef"]["name"], v["valueFrom"]["secretKeyRef"]["key"])
        for _, c in containers(spec)
        if is_gateway(c)
        for v in c.get("env") or []
        if "secretKeyRef" in v.get("valueFrom", {})
    }
    refs |= {
        (vol["secret"]["secretName"], key)
        for vol in spec.get("volumes") or []
        if "secret" in vol
        for key in examples.get(vol["secret"]["secretName"], {"<missing example>"})
    }
    assert refs
    for name, key in refs:
        assert key in examples.get(name, set()), f"secret {name} key {key} has no example"


def test_executors_connect_to_the_socket_the_gateway_binds(rendered: tuple[str, list[Doc]]) -> None:
    variant, docs = rendered
    gw_spec = _gateway_pod(variant, docs)
    env = _gateway_env(_gateway(gw_spec), _by_kind(docs, "ConfigMap"))
    sock = env["LAKEGATE__LISTEN__HTTP_UDS"]
    sock_dir = sock.rsplit("/", 1)[0]
    assert sock_dir in {m["mountPath"] for m in _gateway(gw_spec)["volumeMounts"]}
    (template,) = load_docs(K8S / f"spark/executor-pod-template-{variant}.yaml")
    ex_spec = pod_spec(template)
    assert ex_spec is not None
    executor = next(c for c in ex_spec["containers"] if c["name"] == "spark-executor")
    ex_env = {v["name"]: v.get("value") for v in executor["env"]}
    assert ex_env["LAKEGATE_URL"] == f"unix:{sock}"
    assert sock_dir in {m["mountPath"] for m in executor["volumeMounts"]}
    # Socket mode 0660: the executor must be in the gateway's group.
    gw_group = _gateway(gw_spec)["securityContext"]["runAsGroup"]
    assert gw_group in ex_spec["securityContext"]["supplementalGroups"]
    if variant == "daemonset":
        host_paths = {
            v["hostPath"]["path"]
            for s in (gw_spec, ex_spec)
            for v in s["volumes"]
            if "hostPath" in v
        }
        assert host_paths == {sock_dir}


def test_spark_examples_point_executors_at_the_socket() -> None:
    conf = (K8S / "spark/spark-defaults.conf").read_text(encoding="utf-8")
    settings = dict(
        line.split(None, 1)
        for line in conf.splitlines()
        if line.strip() and not line.startswith("#")
    )
    assert settings["spark.executorEnv.LAKEGATE_URL"].strip() == "unix:/var/run/lakegate/http.sock"
    assert (
        settings["spark.kubernetes.executor.podTemplateContainerName"].strip() == "spark-executor"
    )
    assert (
        K8S
        / "spark"
        / settings["spark.kubernetes.executor.podTemplateFile"].strip().rsplit("/", 1)[1]
    ).is_file()
    (app,) = load_docs(K8S / "spark/sparkapplication.yaml")
    assert app["kind"] == "SparkApplication"
    for role in ("driver", "executor"):
        env = {v["name"]: v.get("value") for v in app["spec"][role]["env"]}
        assert env["LAKEGATE_URL"] == "unix:/var/run/lakegate/http.sock"
        assert 10001 in app["spec"][role]["podSecurityContext"]["supplementalGroups"]
    assert app["spec"]["volumes"][0]["hostPath"]["path"] == "/var/run/lakegate"
