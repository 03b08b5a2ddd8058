"""deploy/monitoring/dashboard.json: a Grafana dashboard that imports into any Prometheus setup."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.deploy.manifests import MONITORING

pytestmark = pytest.mark.deploy


@pytest.fixture(scope="module")
def dashboard() -> dict[str, Any]:
    return dict(json.loads((MONITORING / "dashboard.json").read_text(encoding="utf-8")))


def test_dashboard_has_identity_and_a_datasource_variable(dashboard: dict[str, Any]) -> None:
    assert dashboard["uid"]
    assert dashboard["title"] == "Lakegate"
    variables = {v["name"]: v for v in dashboard["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource"
    assert variables["datasource"]["query"] == "prometheus"


def test_every_panel_queries_through_the_datasource_variable(dashboard: dict[str, Any]) -> None:
    for panel in dashboard["panels"]:
        assert panel["title"]
        assert panel["targets"], panel["title"]
        for target in panel["targets"]:
            assert target["datasource"]["uid"] == "${datasource}", panel["title"]
            assert target["expr"].strip(), panel["title"]
            assert "$instance" in target["expr"], panel["title"]


def test_panel_ids_are_unique_and_panels_do_not_overlap(dashboard: dict[str, Any]) -> None:
    panels = dashboard["panels"]
    assert len({p["id"] for p in panels}) == len(panels)
    cells: set[tuple[int, int]] = set()
    for p in panels:
        g = p["gridPos"]
        assert 0 <= g["x"]
        assert g["x"] + g["w"] <= 24
        mine = {
            (x, y) for x in range(g["x"], g["x"] + g["w"]) for y in range(g["y"], g["y"] + g["h"])
        }
        assert not cells & mine, p["title"]
        cells |= mine


def test_dashboard_shows_what_the_alerts_watch(dashboard: dict[str, Any]) -> None:
    exprs = " ".join(t["expr"] for p in dashboard["panels"] for t in p["targets"])
    for metric in (
        "lakegate_stale_serving",
        "lakegate_idp_token_expiry_timestamp_seconds",
        "lakegate_served_remaining_seconds_bucket",
        "lakegate_upstream_requests_total",
        'result="miss"',
    ):
        assert metric in exprs
