"""deploy/monitoring/alerts.yaml: valid rules that fire when they should, in both forms."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from tests.deploy.manifests import K8S, MONITORING, load_docs, pod_spec
from tests.deploy.monitoring import promtool

pytestmark = pytest.mark.deploy

ALERTS = MONITORING / "alerts.yaml"
# What the issue asks to be alerted on -> the alert that does it.
REQUIRED = {
    "token refresh failing": "LakegateTokenRefreshFailing",
    "serving stale": "LakegateServingStale",
    "credentials near the floor": "LakegateCredentialsNearFloor",
    "upstream error rate": "LakegateUpstreamErrorRate",
    "cache amplification collapsing": "LakegateCacheAmplificationCollapsed",
}


def _alerts() -> dict[str, dict[str, object]]:
    groups = yaml.safe_load(ALERTS.read_text(encoding="utf-8"))["groups"]
    return {r["alert"]: r for g in groups for r in g["rules"] if "alert" in r}


def test_promtool_accepts_the_rules() -> None:
    done = promtool.run("check", "rules", str(ALERTS))
    assert done.returncode == 0, done.stdout + done.stderr


def test_promtool_rejects_a_broken_rule(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        "groups:\n  - name: x\n    rules:\n      - alert: X\n"
        "        expr: rate(lakegate_requests_total[5m]\n"  # unbalanced parenthesis
    )
    assert promtool.run("check", "rules", str(bad)).returncode != 0


def test_alert_unit_tests_pass() -> None:
    """alerts_test.yaml: each alert fires on a failing gateway and stays quiet on a healthy one."""
    done = promtool.run("test", "rules", "alerts_test.yaml", cwd=MONITORING)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "SUCCESS" in done.stdout


def test_every_alert_has_a_unit_test() -> None:
    tests = yaml.safe_load((MONITORING / "alerts_test.yaml").read_text(encoding="utf-8"))["tests"]
    tested = {
        case["alertname"]
        for t in tests
        for case in t.get("alert_rule_test", [])
        if case.get("exp_alerts")
    }
    assert tested == set(_alerts())


@pytest.mark.parametrize(("concern", "alert"), REQUIRED.items())
def test_each_required_concern_has_an_alert(concern: str, alert: str) -> None:
    rule = _alerts()[alert]
    labels = rule["labels"]
    annotations = rule["annotations"]
    assert isinstance(labels, dict)
    assert labels["severity"] in {"info", "warning", "critical"}
    assert isinstance(annotations, dict)
    assert annotations["summary"]
    assert annotations["description"]


def test_prometheus_rule_resource_carries_the_same_groups() -> None:
    (resource,) = load_docs(MONITORING / "prometheusrule.yaml")
    assert resource["kind"] == "PrometheusRule"
    assert (
        resource["spec"]["groups"] == yaml.safe_load(ALERTS.read_text(encoding="utf-8"))["groups"]
    )


def test_scrape_config_is_valid_prometheus_configuration(tmp_path: Path) -> None:
    """promtool check config on prometheus.yaml with its pod discovery swapped for a static target.

    Debian's Prometheus is built without Kubernetes service discovery, so the swap lets promtool
    check everything else (relabelling regexes, rule files, intervals) on this machine.
    """
    config = yaml.safe_load((MONITORING / "prometheus.yaml").read_text(encoding="utf-8"))
    (job,) = config["scrape_configs"]
    assert job["kubernetes_sd_configs"] == [{"role": "pod", "namespaces": {"names": ["lakegate"]}}]
    job.pop("kubernetes_sd_configs")
    job["static_configs"] = [{"targets": ["127.0.0.1:8765"]}]
    (tmp_path / "alerts.yaml").write_text(ALERTS.read_text(encoding="utf-8"))
    (tmp_path / "prometheus.yaml").write_text(yaml.safe_dump(config))
    done = promtool.run("check", "config", str(tmp_path / "prometheus.yaml"))
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.parametrize("variant", ["daemonset", "nodelocal"])
def test_scrape_targets_are_the_gateway_pods_ops_port(variant: str) -> None:
    (ds,) = load_docs(K8S / f"overlays/{variant}/daemonset.yaml")
    spec = pod_spec(ds)
    assert spec is not None
    pod_labels = ds["spec"]["template"]["metadata"]["labels"]
    ports = {p["name"] for c in spec["containers"] for p in c.get("ports", [])}
    (monitor,) = load_docs(MONITORING / "podmonitor.yaml")
    assert monitor["spec"]["selector"]["matchLabels"].items() <= pod_labels.items()
    assert monitor["spec"]["namespaceSelector"]["matchNames"] == ["lakegate"]
    for endpoint in monitor["spec"]["podMetricsEndpoints"]:
        assert endpoint["port"] in ports
        assert endpoint["path"] == "/metrics"
    config = yaml.safe_load((MONITORING / "prometheus.yaml").read_text(encoding="utf-8"))
    keep = [r for r in config["scrape_configs"][0]["relabel_configs"] if r.get("action") == "keep"]
    label_rule, port_rule = keep
    assert label_rule["regex"] == ";".join(
        pod_labels[k] for k in ("app.kubernetes.io/name", "app.kubernetes.io/component")
    )
    assert re.fullmatch(port_rule["regex"], "ops")
    assert "ops" in ports


def _readme_anchors() -> set[str]:
    """GitHub-style anchors of deploy/README.md headings (lowercase, spaces to dashes)."""
    text = (MONITORING.parent / "README.md").read_text(encoding="utf-8")
    out = set()
    for line in text.splitlines():
        if line.startswith("#"):
            title = line.lstrip("#").strip().lower()
            out.add(re.sub(r"[^a-z0-9 _-]", "", title).replace(" ", "-"))
    return out


@pytest.mark.parametrize("alert", sorted(_alerts()))
def test_every_alert_links_a_runbook_section_that_exists(alert: str) -> None:
    annotations = _alerts()[alert]["annotations"]
    assert isinstance(annotations, dict)
    path, _, anchor = str(annotations["runbook_url"]).partition("#")
    assert path == "deploy/README.md"
    assert anchor in _readme_anchors(), f"{alert}: no section #{anchor} in deploy/README.md"
