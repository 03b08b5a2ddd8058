"""The node-local Service variant end to end, with the stack's IdP standing in for the cluster.

As in overlays/nodelocal: credentials on TCP with `CALLERS__MODE=jwt`, probes and metrics on the
ops port, a policy keyed by caller-name patterns. Executors hold a token file (the projected
service-account token) and point LAKEGATE_TOKEN_FILE at it; the client re-reads it. Real JWTs
from the local node-oidc-provider play the projected tokens.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from lakegate_client import Client, PermissionDeniedError
from tests.gateway_process import running_gateway, stack_env
from tests.integration.gateway.conftest import idp_token, jwt_callers_env

pytestmark = pytest.mark.integration


def test_projected_token_file_gets_credentials_and_the_pattern_policy_applies(
    info: dict[str, Any], new_table, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    table = new_table(prefix="nodelocal")
    ns, name = table["namespace"], table["table"]["name"]
    policy = "callers:\n  'ali*':\n    - {warehouse: demo, namespace: '*', table: '*'}\n"
    env = stack_env(info) | jwt_callers_env(info, tmp_path, policy)
    env["LAKEGATE__LISTEN__OPS_PORT"] = "0"
    token_file = tmp_path / "projected" / "token"
    token_file.parent.mkdir()
    with running_gateway(tmp_path, env, name="nodelocal") as gw:
        ops_port = json.loads((tmp_path / "nodelocal-ports.json").read_text())["ops_port"]
        ops = f"http://127.0.0.1:{ops_port}"
        with httpx.Client(trust_env=False, timeout=30) as c:
            assert c.get(f"{ops}/readyz").status_code == 200
            assert "lakegate_requests_total" in c.get(f"{ops}/metrics").text
            creds_path = f"/v1/warehouses/demo/namespaces/{ns}/tables/{name}/credentials"
            assert c.get(ops + creds_path, headers={"X-Lakegate-Request": "1"}).status_code == 404
        monkeypatch.delenv("LAKEGATE_TOKEN", raising=False)
        monkeypatch.setenv("LAKEGATE_TOKEN_FILE", str(token_file))
        token_file.write_text(idp_token(info, "alice"))
        with Client(url=gw.http_url, warehouse="demo", memo=False) as client:
            creds = client.credentials(ns, name)
            assert creds.storage_credentials
            assert creds.table == name
            # The token file is rotated to another service account's token: the policy applies
            # to the new identity (bob matches no pattern).
            token_file.write_text(idp_token(info, "bob"))
            with pytest.raises(PermissionDeniedError):
                client.credentials(ns, name)
        log = gw.log_text()
    assert token_file.read_text() not in log
