"""Read the counters that show the saving: every gateway's /metrics, the catalog's and the IdP's.

Why three sources: each node's gateway counts what it served (and whether from cache) and what it
asked upstream; only the catalog and the IdP can say how many calls really reached them in total.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import httpx

from devstack.metrics_scrape import parse, total
from devstack.stack_info import StackInfo

_TIMEOUT_S = 5.0
_NOT_SERVED = ("denied", "not_found", "error")
_REQUESTS = "lakegate_requests_total"
_UPSTREAM = "lakegate_upstream_requests_total"
_EVICTIONS = "lakegate_evictions_total"


@dataclass(frozen=True)
class NodeCounters:
    """One node's gateway, read from its own /metrics."""

    name: str
    gateway: str  # the gateway's HTTP URL
    served: dict[str, int] = field(default_factory=dict)  # credential requests by cache result
    metadata: int = 0
    upstream_credential_calls: int = 0  # catalog credential calls this gateway made
    # The same calls by answer: "200" vended; "404" a table not created yet; "timeout", "error"
    # or a 5xx an attempt that the gateway retried or answered as an error.
    upstream_credential_by_status: dict[str, int] = field(default_factory=dict)
    # Entries dropped because the table changed (a change event, or a create or drop through
    # this gateway): each may be vended again, so it explains one vend past tables x modes.
    invalidated: int = 0
    idp_token_calls: int = 0  # IdP logins this gateway made

    @property
    def credential_requests(self) -> int:
        return sum(v for k, v in self.served.items() if k not in _NOT_SERVED)


@dataclass(frozen=True)
class Counters:
    """One reading of all three sources."""

    nodes: tuple[NodeCounters, ...] = ()
    catalog: dict[str, int] = field(default_factory=dict)
    idp_token_requests: int = 0

    @property
    def gateway_credential(self) -> dict[str, int]:
        """Credential requests served by all gateways, by cache result."""
        total: dict[str, int] = {}
        for node in self.nodes:
            for result, count in node.served.items():
                total[result] = total.get(result, 0) + count
        return total

    @property
    def gateway_credential_total(self) -> int:
        return sum(n.credential_requests for n in self.nodes)

    @property
    def upstream_credential_calls(self) -> int:
        """Catalog calls that vend credentials, as the catalog counted them (generic and Iceberg
        tables' credential endpoints, and Iceberg loads that vended)."""
        return (self.catalog.get("load_generic_table_credentials", 0)
                + self.catalog.get("load_table_credentials", 0)
                + self.catalog.get("load_table_vended", 0))


def read_gateway(http: httpx.Client, name: str, url: str) -> NodeCounters:
    """Parse one gateway's Prometheus text into the demo's per-node counters."""
    answer = http.get(f"{url}/metrics")
    answer.raise_for_status()
    samples = parse(answer.text)
    served: dict[str, int] = {}
    upstream: dict[str, int] = {}
    for (metric, labels), value in samples.items():
        label = dict(labels)
        if metric == _REQUESTS and label.get("kind") == "credential":
            result = label.get("result", "?")
            served[result] = served.get(result, 0) + int(value)
        elif (metric == _UPSTREAM and label.get("target") == "catalog"
              and label.get("op") == "load_credentials" and value):
            status = label.get("status", "?")
            upstream[status] = upstream.get(status, 0) + int(value)
    return NodeCounters(
        name, url, served,
        metadata=int(total(samples, _REQUESTS, kind="metadata")),
        upstream_credential_calls=int(
            total(samples, _UPSTREAM, target="catalog", op="load_credentials")),
        upstream_credential_by_status=upstream,
        invalidated=int(total(samples, _EVICTIONS, reason="invalidated")),
        idp_token_calls=int(total(samples, _UPSTREAM, target="idp")),
    )


def read_counters(info: StackInfo, gateways: Mapping[str, str] | None = None) -> Counters:
    """Read the stack's counters (``info`` is stack.json; ``gateways`` maps node name to gateway
    HTTP URL, default: the stack's own gateway as the single node ``local``)."""
    if gateways is None:
        gateways = {"local": info.gateway_url}
    with httpx.Client(timeout=_TIMEOUT_S, trust_env=False) as http:
        nodes = tuple(read_gateway(http, name, url) for name, url in gateways.items())
        catalog = http.get(f"{info.catalog.url}/_emulator/stats")
        catalog.raise_for_status()
        idp = http.get(f"{info.idp.issuer}/_idp/stats")
        idp.raise_for_status()
    return Counters(
        nodes=nodes,
        catalog={k: int(v) for k, v in catalog.json().items() if isinstance(v, (int, float))},
        idp_token_requests=int(idp.json().get("token_requests", 0)),
    )
