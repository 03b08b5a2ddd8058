"""Read the counters that show the saving: the gateway's /metrics, the catalog's and the IdP's.

Why three sources: the gateway counts what it served (and whether from cache); only the catalog
and the IdP can say how many calls really reached them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import httpx
from prometheus_client.parser import text_string_to_metric_families

_TIMEOUT_S = 5.0


@dataclass(frozen=True)
class Counters:
    """One reading of all three sources."""

    gateway_credential: dict[str, int] = field(default_factory=dict)  # by result
    gateway_metadata: int = 0
    catalog: dict[str, int] = field(default_factory=dict)
    idp_token_requests: int = 0

    @property
    def gateway_credential_total(self) -> int:
        return sum(v for k, v in self.gateway_credential.items() if k not in ("denied", "error"))

    @property
    def upstream_credential_calls(self) -> int:
        """Catalog calls that vend credentials (the load with credentials counts too)."""
        return self.catalog.get("load_generic_table_credentials", 0)


def read_counters(info: dict[str, Any]) -> Counters:
    """Read the stack's counters (``info`` is the stack's stack.json)."""
    with httpx.Client(timeout=_TIMEOUT_S, trust_env=False) as http:
        metrics = http.get(f"{info['gateway']['http_url']}/metrics")
        metrics.raise_for_status()
        catalog = http.get(f"{info['catalog']['url']}/_emulator/stats")
        catalog.raise_for_status()
        idp = http.get(f"{info['idp']['issuer']}/_idp/stats")
        idp.raise_for_status()
    by_result: dict[str, int] = {}
    metadata = 0
    for family in text_string_to_metric_families(metrics.text):
        for sample in family.samples:
            if sample.name != "lakegate_requests_total":
                continue
            kind = sample.labels.get("kind")
            if kind == "credential":
                result = sample.labels.get("result", "?")
                by_result[result] = by_result.get(result, 0) + int(sample.value)
            elif kind == "metadata":
                metadata += int(sample.value)
    return Counters(
        gateway_credential=by_result,
        gateway_metadata=metadata,
        catalog={k: int(v) for k, v in catalog.json().items() if isinstance(v, (int, float))},
        idp_token_requests=int(idp.json().get("token_requests", 0)),
    )
