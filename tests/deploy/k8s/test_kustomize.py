"""The rendered variants hang together: settings the gateway accepts, sockets where executors look.

Renders each overlay with kustomize (the binary bundled in kubectl), then follows the wiring a
reviewer would check by hand: the ConfigMap is a valid gateway configuration (loaded through
the gateway's own `Settings`), secrets and config maps referenced exist, the socket path the
gateway binds is the one executors mount and put in LAKEGATE_URL, images carry the release tag.
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

import pytest
import yaml

from gateway.preflight import read_role_problem
from gateway.settings import Settings, SettingsError
from gateway.surfaces.policy import CallerPolicy, parse_rules
from tests.deploy.manifests import (
    CLUSTER_KINDS,
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


def _render(variant: str) -> list[Doc]:
    """The overlay's objects (the test is skipped only where kustomize itself is missing)."""
    try:
        return render(K8S / "overlays" / variant)
    except KustomizeUnavailableError as exc:
        pytest.skip(str(exc))


@pytest.fixture(scope="module", params=OVERLAYS)
def rendered(request: pytest.FixtureRequest) -> tuple[str, list[Doc]]:
    return request.param, _render(request.param)


def _by_kind(docs: list[Doc], kind: str) -> dict[str, Doc]:
    return {d["metadata"]["name"]: d for d in docs if d["kind"] == kind}


def _release() -> str:
    with (REPO_ROOT / "pyproject.toml").open("rb") as fh:
        return str(tomllib.load(fh)["project"]["version"])


def _gateway_pod(variant: str, docs: list[Doc]) -> Doc:
    if variant in {"daemonset", "nodelocal"}:
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


def _mounted_secrets(spec: Doc, env: dict[str, str], root: Path) -> Path | None:
    """The gateway's LAKEGATE_SECRETS_DIR as the kubelet would fill it, under `root`.

    The directory must be a Secret volume mounted into the gateway container; each item becomes
    a file (placeholder value) under its `path`, so the settings load sees the same names.
    """
    where = env.get("LAKEGATE_SECRETS_DIR")
    if where is None:
        return None
    (mount,) = [m for m in _gateway(spec).get("volumeMounts") or [] if m["mountPath"] == where]
    (volume,) = [v for v in spec.get("volumes") or [] if v["name"] == mount["name"]]
    assert "secret" in volume, f"LAKEGATE_SECRETS_DIR={where} is not a Secret volume"
    out = root / "secrets"
    out.mkdir()
    for item in volume["secret"]["items"]:
        (out / item["path"]).write_text(SECRET_PLACEHOLDER + "\n")
    return out


def test_overlay_objects_share_one_namespace(rendered: tuple[str, list[Doc]]) -> None:
    variant, docs = rendered
    expected = {"daemonset": "lakegate", "nodelocal": "lakegate", "sidecar": "spark-jobs"}[variant]
    namespaced = [d for d in docs if d["kind"] not in CLUSTER_KINDS]
    assert namespaced
    assert {d["metadata"].get("namespace") for d in namespaced} == {expected}


def test_gateway_configuration_is_accepted_by_the_gateway_settings(
    rendered: tuple[str, list[Doc]], tmp_path: Path
) -> None:
    variant, docs = rendered
    spec = _gateway_pod(variant, docs)
    env = _gateway_env(_gateway(spec), _by_kind(docs, "ConfigMap"))
    settings = Settings.load(environ=env, secrets_dir=_mounted_secrets(spec, env, tmp_path))
    assert settings.token.kind.value == "client_credentials"
    # Fail closed on access level: the shipped policy limits callers to read, so the shipped
    # settings carry the read role the gateway needs to vend them read-only keys.
    policies = [cm["data"]["policy.yaml"] for cm in _by_kind(docs, "ConfigMap").values()
                if "policy.yaml" in cm.get("data", {})]
    for text in policies:
        policy = CallerPolicy(parse_rules(yaml.safe_load(text), "policy.yaml"))
        assert policy.read_limited_callers()
        assert read_role_problem(settings.upstream, policy) is None
    assert settings.token.client_secret is not None
    if variant == "daemonset":
        assert settings.callers.mode.value == "token"
        # Credentials on the sockets and loopback only; the pod IP serves probes and metrics.
        assert settings.listen.is_loopback
    elif variant == "nodelocal":
        assert settings.callers.mode.value == "jwt"
        # The client secret comes from the mounted Secret file, never from the environment.
        assert "LAKEGATE__TOKEN__CLIENT_SECRET" not in env
        assert settings.token.client_secret.get_secret_value() == SECRET_PLACEHOLDER
    else:
        assert settings.listen.is_loopback


def test_settings_check_would_reject_an_open_listener_without_caller_auth(
    rendered: tuple[str, list[Doc]], tmp_path: Path
) -> None:
    variant, docs = rendered
    spec = _gateway_pod(variant, docs)
    env = _gateway_env(_gateway(spec), _by_kind(docs, "ConfigMap"))
    open_bind = "0.0.0.0"  # noqa: S104 (the point: this must be refused)
    env |= {"LAKEGATE__LISTEN__HOST": open_bind, "LAKEGATE__CALLERS__MODE": "none"}
    with pytest.raises(SettingsError, match="LAKEGATE__LISTEN__HOST"):
        Settings.load(environ=env, secrets_dir=_mounted_secrets(spec, env, tmp_path))


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
        for key in (
            [item["key"] for item in vol["secret"]["items"]] if "items" in vol["secret"]
            else examples.get(vol["secret"]["secretName"], {"<missing example>"})
        )
    }
    assert refs
    for name, key in refs:
        assert key in examples.get(name, set()), f"secret {name} key {key} has no example"


# nodelocal has no shared socket: its executors use the node-local Service (tested below).
@pytest.mark.parametrize("variant", [v for v in OVERLAYS if v != "nodelocal"])
def test_executors_connect_to_the_socket_the_gateway_binds(variant: str) -> None:
    docs = _render(variant)
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


def _probe_ports(container: Doc) -> set[object]:
    return {
        container[p]["httpGet"]["port"]
        for p in ("startupProbe", "livenessProbe", "readinessProbe")
        if "httpGet" in container.get(p, {})
    }


@pytest.mark.parametrize("variant", ["daemonset", "nodelocal"])
def test_probes_and_metrics_use_the_ops_port_of_the_ops_listener(variant: str) -> None:
    docs = _render(variant)
    gw = _gateway(_gateway_pod(variant, docs))
    env = _gateway_env(gw, _by_kind(docs, "ConfigMap"))
    ports = {p["name"]: p["containerPort"] for p in gw["ports"]}
    assert _probe_ports(gw) == {"ops"}
    assert ports["ops"] == int(env["LAKEGATE__LISTEN__OPS_PORT"])
    assert ports["ops"] not in {
        int(env["LAKEGATE__LISTEN__HTTP_PORT"]),
        int(env["LAKEGATE__LISTEN__GRPC_PORT"]),
    }
    (policy,) = _by_kind(docs, "NetworkPolicy").values()
    monitoring = [
        rule
        for rule in policy["spec"]["ingress"]
        if rule["from"][0]["namespaceSelector"]["matchLabels"].get("kubernetes.io/metadata.name")
        == "monitoring"
    ]
    assert [p["port"] for rule in monitoring for p in rule["ports"]] == [ports["ops"]]


@pytest.mark.parametrize("variant", ["daemonset", "nodelocal"])
def test_daemonset_rollout_is_prioritised_tolerant_and_by_percentage(variant: str) -> None:
    docs = _render(variant)
    ds = _by_kind(docs, "DaemonSet")["lakegate"]
    spec = pod_spec(ds)
    assert spec is not None
    assert spec["priorityClassName"] in _by_kind(docs, "PriorityClass")
    assert any(t.get("operator") == "Exists" for t in spec["tolerations"])
    rolling = ds["spec"]["updateStrategy"]["rollingUpdate"]
    moving = rolling["maxUnavailable"] or rolling["maxSurge"]
    assert str(moving).endswith("%")
    if variant == "daemonset":
        # Two gateways on one node would race for the socket path: never surge there.
        assert rolling["maxSurge"] == 0


@pytest.mark.parametrize("variant", ["daemonset", "nodelocal"])
def test_settings_changes_roll_the_pods(variant: str) -> None:
    """Generated ConfigMaps carry a content hash, so an edited setting changes the pod template."""
    before = _render(variant)
    refs = {
        s["configMapRef"]["name"]
        for _, c in containers(_gateway_pod(variant, before))
        for s in c.get("envFrom") or []
    }
    (name,) = refs
    assert name.startswith("lakegate-config-")
    assert name in _by_kind(before, "ConfigMap")


def test_nodelocal_executors_reach_the_local_service_with_an_audience_bound_token() -> None:
    docs = _render("nodelocal")
    gw = _gateway(_gateway_pod("nodelocal", docs))
    env = _gateway_env(gw, _by_kind(docs, "ConfigMap"))
    service = _by_kind(docs, "Service")["lakegate-local"]
    assert service["spec"]["internalTrafficPolicy"] == "Local"
    gw_ports = {p["name"]: p["containerPort"] for p in gw["ports"]}
    svc_ports = {p["name"]: p for p in service["spec"]["ports"]}
    assert gw_ports[svc_ports["http"]["targetPort"]] == int(env["LAKEGATE__LISTEN__HTTP_PORT"])
    assert gw_ports[svc_ports["grpc"]["targetPort"]] == int(env["LAKEGATE__LISTEN__GRPC_PORT"])
    assert "ops" not in {p["targetPort"] for p in svc_ports.values()}
    labels = _gateway_pod_labels(docs)
    assert service["spec"]["selector"].items() <= labels.items()
    (template,) = load_docs(K8S / "spark/executor-pod-template-nodelocal.yaml")
    ex_spec = pod_spec(template)
    assert ex_spec is not None
    assert not [v for v in ex_spec["volumes"] if "hostPath" in v]
    executor = next(c for c in ex_spec["containers"] if c["name"] == "spark-executor")
    ex_env = {v["name"]: v.get("value") for v in executor["env"]}
    ns = service["metadata"]["namespace"]
    port = svc_ports["http"]["port"]
    assert ex_env["LAKEGATE_URL"] == f"http://lakegate-local.{ns}.svc.cluster.local:{port}"
    token_file = ex_env["LAKEGATE_TOKEN_FILE"]
    (vol,) = [v for v in ex_spec["volumes"] if "projected" in v]
    (source,) = vol["projected"]["sources"]
    sat = source["serviceAccountToken"]
    assert sat["audience"] == env["LAKEGATE__CALLERS__AUDIENCE"]
    assert 600 <= sat["expirationSeconds"] <= 3600
    (mount,) = [m for m in executor["volumeMounts"] if m["name"] == vol["name"]]
    assert token_file == f"{mount['mountPath']}/{sat['path']}"
    # The gateway's own token (to read the issuer's JWKS) and the cluster CA are mounted.
    gw_mounts = {m["mountPath"] for m in gw["volumeMounts"]}
    for key in ("LAKEGATE__CALLERS__CA_FILE", "LAKEGATE__CALLERS__BEARER_TOKEN_FILE"):
        assert env[key].rsplit("/", 1)[0] in gw_mounts
    (binding,) = _by_kind(docs, "ClusterRoleBinding").values()
    assert binding["roleRef"]["name"] == "system:service-account-issuer-discovery"
    assert binding["subjects"][0]["name"] == _gateway_pod("nodelocal", docs)["serviceAccountName"]
    # Policy keyed by service account (with a wildcard).
    policy = yaml.safe_load(_by_kind(docs, "ConfigMap")[_policy_name(docs)]["data"]["policy.yaml"])
    callers = policy["callers"]
    assert any(k.startswith("system:serviceaccount:") and k.endswith("*") for k in callers)


def _gateway_pod_labels(docs: list[Doc]) -> dict[str, str]:
    labels: dict[str, str] = _by_kind(docs, "DaemonSet")["lakegate"]["spec"]["template"][
        "metadata"
    ]["labels"]
    return labels


def _policy_name(docs: list[Doc]) -> str:
    (name,) = [n for n in _by_kind(docs, "ConfigMap") if n.startswith("lakegate-policy-")]
    return name
