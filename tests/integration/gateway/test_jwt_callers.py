"""JWT caller mode against the stack's real IdP: tokens verified locally against its JWKS."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from devstack.stack_info import StackInfo
from tests.gateway_process import running_gateway, stack_env
from tests.integration.gateway.conftest import idp_token, jwt_callers_env

pytestmark = pytest.mark.integration


def test_jwt_callers_are_verified_and_named_by_claim(
    info: StackInfo, tmp_path: Path
) -> None:
    policy = "callers:\n  alice:\n    - {warehouse: demo, namespace: '*', table: '*'}\n"
    env = stack_env(info) | jwt_callers_env(info, tmp_path, policy)
    alice, bob = idp_token(info, "alice"), idp_token(info, "bob")
    with running_gateway(tmp_path, env, name="jwt") as gw, httpx.Client(
        base_url=gw.http_url, trust_env=False, timeout=30
    ) as c:
        who = c.get("/management/v1/whoami", headers={"Authorization": f"Bearer {alice}"})
        assert who.status_code == 200, who.text
        assert who.json()["id"] == "oidc~alice"  # Lakekeeper's id form
        assert who.json()["name"] == "alice"
        path = f"/v1/warehouses/demo/namespaces/{info.namespace}/tables/nope/credentials"
        # alice passes auth and policy (then the table does not exist); bob has no grant
        assert c.get(path, headers={"Authorization": f"Bearer {alice}"}).status_code == 404
        assert c.get(path, headers={"Authorization": f"Bearer {bob}"}).status_code == 403
        tampered = alice[:-4] + ("AAAA" if not alice.endswith("AAAA") else "BBBB")
        assert c.get(path, headers={"Authorization": f"Bearer {tampered}"}).status_code == 401
        log = gw.log_text()
    assert alice not in log
    assert bob not in log
