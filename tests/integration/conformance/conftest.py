"""One HTTP client per target (the emulator and the gateway) on the real local stack.

Both are addressed exactly alike: warehouse UUID as `{prefix}`, a bearer token. The emulator
validates the token against the stack's IdP; the devstack gateway runs with callers mode `none`
(any token) and authenticates upstream with its own session.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest

from devstack.bootstrap import fetch_token
from devstack.stack_info import StackInfo

TARGETS = ("emulator", "gateway")


@dataclass
class Target:
    """A Lakekeeper-compatible base URL and what a test needs to address it."""

    name: str
    http: httpx.Client
    info: StackInfo

    @property
    def wh(self) -> str:
        return self.info.warehouse.id

    @property
    def ns(self) -> str:
        return self.info.namespace

    def tables(self, ns: str | None = None) -> str:
        return f"/lakekeeper/v1/{self.wh}/namespaces/{ns or self.ns}/generic-tables"

    def create(self, name: str, ns: str | None = None, **body: Any) -> httpx.Response:
        return self.http.post(self.tables(ns), json={"name": name, "format": "lance", **body})

    def new_table(self, prefix: str = "c") -> tuple[str, dict[str, Any]]:
        name = f"{prefix}_{uuid.uuid4().hex[:10]}"
        resp = self.create(name)
        assert resp.status_code == 200, resp.text
        return name, resp.json()

    def new_namespace(self, prefix: str = "cns") -> str:
        ns = f"{prefix}_{uuid.uuid4().hex[:8]}"
        resp = self.http.post(f"/catalog/v1/{self.wh}/namespaces", json={"namespace": [ns]})
        assert resp.status_code == 200, resp.text
        return ns


@pytest.fixture(scope="module", params=TARGETS)
def target(request: pytest.FixtureRequest, devstack: Any) -> Iterator[Target]:
    info = devstack.info
    if request.param == "gateway":
        if info.gateway is None:
            pytest.fail("the devstack started without a gateway")
        base, token = info.gateway_url, "any-token"
    else:
        c = info.idp.clients["direct"]
        base = info.catalog.url
        token = fetch_token(info.idp.token_url, c.id, c.secret)
    with httpx.Client(base_url=base, headers={"Authorization": f"Bearer {token}"},
                      timeout=30, trust_env=False) as http:
        yield Target(request.param, http, info)
