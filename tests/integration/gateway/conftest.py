"""Fixtures for whole-daemon tests against the real local stack (session `devstack` fixture)."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from devstack.stack_info import StackInfo

MARK = {"X-Lakegate-Request": "1"}


@pytest.fixture(scope="session")
def info(devstack: Any) -> StackInfo:
    if devstack.info.gateway is None:
        pytest.fail("the devstack started without a gateway")
    return devstack.info


@pytest.fixture(scope="session")
def gw(info: StackInfo) -> Iterator[httpx.Client]:
    """A sync client for the devstack's gateway (loopback TCP)."""
    with httpx.Client(base_url=info.gateway_url, headers=MARK, timeout=30,
                      trust_env=False) as client:
        yield client


@pytest.fixture
def new_table(gw: httpx.Client, info: StackInfo) -> Callable[..., dict[str, Any]]:
    """Create a uniquely named table through the gateway; returns the native load answer."""

    def create(namespace: str | None = None, prefix: str = "t",
               client: httpx.Client | None = None) -> dict[str, Any]:
        ns = namespace or info.namespace
        name = f"{prefix}_{uuid.uuid4().hex[:10]}"
        resp = (client or gw).post(f"/v1/warehouses/demo/namespaces/{ns}/tables",
                                   json={"name": name, "format": "lance"})
        assert resp.status_code == 200, resp.text
        doc: dict[str, Any] = resp.json()
        doc["namespace"] = ns
        return doc

    return create


def idp_token(info: StackInfo, client: str) -> str:
    """A real JWT for one of the stack IdP's clients (client-credentials grant)."""
    creds = info.idp.clients[client]
    resp = httpx.post(info.idp.token_url, trust_env=False, timeout=30, data={
        "grant_type": "client_credentials", "client_id": creds.id,
        "client_secret": creds.secret, "resource": info.idp.audience})
    assert resp.status_code == 200, resp.text
    return str(resp.json()["access_token"])


def jwt_callers_env(info: StackInfo, tmp_path: Path, policy: str) -> dict[str, str]:
    """Settings for JWT callers verified against the stack IdP's JWKS, named by `client_id`,
    under the caller policy `policy` (YAML, written to tmp_path/policy.yaml)."""
    policy_file = tmp_path / "policy.yaml"
    policy_file.write_text(policy)
    return {
        "LAKEGATE__CALLERS__MODE": "jwt",
        "LAKEGATE__CALLERS__JWKS_URL": info.idp.jwks_uri,
        "LAKEGATE__CALLERS__ISSUER": info.idp.issuer,
        "LAKEGATE__CALLERS__AUDIENCE": info.idp.audience,
        "LAKEGATE__CALLERS__NAME_CLAIM": "client_id",
        "LAKEGATE__CALLERS__POLICY_FILE": str(policy_file),
    }


def ensure_namespace(gw: httpx.Client, namespace: str) -> None:
    """Create a namespace through the gateway's forwarded Iceberg route (409 = exists)."""
    resp = gw.post("/catalog/v1/demo/namespaces", json={"namespace": [namespace]},
                   headers={"Authorization": "Bearer x"})
    assert resp.status_code in (200, 409), resp.text


