"""Every metric the rules and the dashboard use is one the gateway really exports.

The exported set comes from the gateway itself: `gateway.metrics.Metrics` built on a fresh
registry, expanded into the sample names Prometheus stores (`_total` for counters, `_bucket`,
`_sum`, `_count` for histograms, `_info` for info metrics). It is also checked against the metric
contract in docs/contracts.md §6, so a rename on either side fails here.
"""

from __future__ import annotations

import json
import re

import pytest
import yaml
from prometheus_client import CollectorRegistry

from gateway.metrics import Metrics
from tests.deploy.manifests import MONITORING, REPO_ROOT, exprs

pytestmark = pytest.mark.deploy

METRIC = re.compile(r"\blakegate_[a-z0-9_]+\b")
SUFFIXES = {
    "counter": ("_total", "_created"),
    "histogram": ("_bucket", "_sum", "_count", "_created"),
    "gauge": ("",),
    "info": ("_info",),
    "summary": ("", "_sum", "_count", "_created"),
}


def exported_sample_names() -> set[str]:
    names: set[str] = set()
    for family in Metrics(CollectorRegistry()).registry.collect():
        names.update(family.name + suffix for suffix in SUFFIXES[family.type])
    return names


def contract_names() -> set[str]:
    """The metric names listed in docs/contracts.md §6, with histogram series expanded."""
    text = (REPO_ROOT / "docs/contracts.md").read_text(encoding="utf-8")
    section = text.split("## 6.", 1)[1].split("\n## ", 1)[0]
    names = set(METRIC.findall(section))
    for name in list(names):
        if name.endswith("_seconds") and name != "lakegate_idp_token_expiry_timestamp_seconds":
            names.update(name + s for s in ("_bucket", "_sum", "_count"))
    return names


def referenced() -> dict[str, set[str]]:
    rules = yaml.safe_load((MONITORING / "alerts.yaml").read_text(encoding="utf-8"))
    dashboard = json.loads((MONITORING / "dashboard.json").read_text(encoding="utf-8"))
    variables = json.dumps(dashboard.get("templating", {}))
    return {
        "alerts.yaml": {m for e in exprs(rules) for m in METRIC.findall(e)},
        "dashboard.json": {m for e in exprs(dashboard) for m in METRIC.findall(e)}
        | set(METRIC.findall(variables)),
    }


def test_rules_and_dashboard_reference_the_core_metrics() -> None:
    refs = referenced()
    assert "lakegate_requests_total" in refs["alerts.yaml"]
    assert len(refs["dashboard.json"]) >= 12


@pytest.mark.parametrize("source", ["alerts.yaml", "dashboard.json"])
def test_every_referenced_metric_is_exported_by_the_gateway(source: str) -> None:
    unknown = referenced()[source] - exported_sample_names()
    assert not unknown, f"{source} uses metrics the gateway does not export: {sorted(unknown)}"


@pytest.mark.parametrize("source", ["alerts.yaml", "dashboard.json"])
def test_every_referenced_metric_is_in_the_contract(source: str) -> None:
    unknown = referenced()[source] - contract_names()
    assert not unknown, f"{source} uses metrics outside docs/contracts.md §6: {sorted(unknown)}"


def test_name_check_catches_a_misspelled_metric() -> None:
    exported = exported_sample_names()
    assert "lakegate_requests_total" in exported
    assert "lakegate_request_total" not in exported
    assert "lakegate_requests" not in exported  # counters are only stored with _total
    assert "lakegate_served_remaining_seconds_bucket" in exported
