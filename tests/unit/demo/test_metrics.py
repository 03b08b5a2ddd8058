"""demo/metrics.py: a node's counters read from a real gateway metric set's exposition."""

from __future__ import annotations

import httpx
from prometheus_client import generate_latest

from demo.metrics import read_gateway
from demo.report import format_catalog_calls
from gateway.metrics import Metrics


def test_a_gateways_exposition_becomes_the_nodes_counters() -> None:
    metrics = Metrics()
    metrics.requests.labels("http", "credential", "hit").inc(7)
    metrics.requests.labels("grpc", "credential", "hit").inc(2)
    metrics.requests.labels("http", "credential", "miss").inc(3)
    metrics.requests.labels("http", "credential", "error").inc(1)
    metrics.requests.labels("http", "metadata", "miss").inc(4)
    metrics.upstream_requests.labels("catalog", "load_credentials", "200").inc(3)
    metrics.upstream_requests.labels("catalog", "load_credentials", "404").inc(1)
    metrics.upstream_requests.labels("catalog", "load_credentials", "timeout").inc(1)
    metrics.upstream_requests.labels("catalog", "load_table", "200").inc(5)
    metrics.upstream_requests.labels("idp", "token", "200").inc(1)
    metrics.evictions.labels("invalidated").inc(2)
    metrics.evictions.labels("lru").inc(5)
    body = generate_latest(metrics.registry)

    def handler(request: httpx.Request) -> httpx.Response:
        assert request.url.path == "/metrics"
        return httpx.Response(200, content=body)

    with httpx.Client(transport=httpx.MockTransport(handler)) as http:
        node = read_gateway(http, "node-1", "http://gw")
    assert node.served["hit"] == 9
    assert node.served["miss"] == 3
    assert node.credential_requests == 12  # the error is not a served credential
    assert node.metadata == 4
    assert node.upstream_credential_calls == 5
    # Only answered-200 calls vended; the rest are counted apart (the series at zero are not).
    assert node.upstream_credential_by_status == {"200": 3, "404": 1, "timeout": 1}
    assert node.invalidated == 2  # only the entries a table change dropped
    assert format_catalog_calls(node) == "3 +404x1 timeoutx1 (2 inv.)"
    assert node.idp_token_calls == 1
