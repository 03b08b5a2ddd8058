"""A real Prometheus scrapes a running gateway and finds its request counters (integration).

The gateway is the local stack's (`devstack` fixture); Prometheus is Debian's binary on loopback
with a 1 s scrape interval. The test makes credential requests through the native API, then
polls Prometheus's query API (bounded) until `lakegate_requests_total` shows them.
"""

from __future__ import annotations

import shutil
import time
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlsplit

import httpx
import pytest

from devstack.stack_info import StackInfo
from tests.deploy.monitoring.prometheus_server import prometheus

pytestmark = [pytest.mark.integration, pytest.mark.deploy]

REQUESTS = 5
TABLE = "prometheus_scrape_probe"


def _credential_requests(info: StackInfo) -> None:
    base = info.gateway_url
    wh, ns = quote(info.warehouse.name, safe=""), quote(info.namespace, safe="")
    headers = {"X-Lakegate-Request": "1"}
    with httpx.Client(base_url=base, headers=headers, timeout=30) as client:
        created = client.post(
            f"/v1/warehouses/{wh}/namespaces/{ns}/tables", json={"name": TABLE, "format": "parquet"}
        )
        assert created.status_code in {200, 201, 409}, created.text
        for _ in range(REQUESTS):
            resp = client.get(f"/v1/warehouses/{wh}/namespaces/{ns}/tables/{TABLE}/credentials")
            assert resp.status_code == 200, resp.text


def _poll(query: Any, promql: str, want: float, timeout_s: float = 30.0) -> dict[str, float]:
    """Poll an instant query until the summed value reaches `want`; returns value by result."""
    deadline = time.monotonic() + timeout_s
    seen: dict[str, float] = {}
    while time.monotonic() < deadline:
        seen = {r["metric"].get("result", ""): float(r["value"][1]) for r in query(promql)}
        if sum(seen.values()) >= want:
            return seen
        time.sleep(0.5)
    return seen


def test_prometheus_finds_the_gateway_request_counters(devstack: Any, tmp_path: Path) -> None:
    info = devstack.info
    if not info.gateway_url:
        pytest.skip("the local stack runs without a gateway (gateway.app not importable yet)")
    if shutil.which("prometheus") is None:
        pytest.skip("prometheus not installed: `make prometheus-bin` (apt-get install prometheus)")
    _credential_requests(info)
    target = urlsplit(info.gateway_url).netloc
    with prometheus(target, tmp_path) as prom:
        up = _poll(prom.query, 'up{job="lakegate"}', 1)
        assert sum(up.values()) >= 1, f"Prometheus never scraped the gateway: {up}"
        by_result = _poll(
            prom.query,
            'sum by (result) (lakegate_requests_total{surface="http",kind="credential"})',
            REQUESTS,
        )
        # At least our requests; other tests share the session gateway, so never "exactly".
        assert sum(by_result.values()) >= REQUESTS, by_result
        assert by_result.get("hit", 0) + by_result.get("coalesced", 0) >= REQUESTS - 1, by_result
        metadata = prom.query('lakegate_build_info{job="lakegate"}')
        assert metadata
        assert metadata[0]["metric"]["version"]
