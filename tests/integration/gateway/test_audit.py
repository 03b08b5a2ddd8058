"""One `lakegate.audit` line per credential decision: caller, table, access, outcome, no secret."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.gateway_process import running_gateway, stack_env

pytestmark = pytest.mark.integration


def _audit_lines(log: str) -> list[dict[str, Any]]:
    out = []
    for line in log.splitlines():
        try:
            doc = json.loads(line)
        except ValueError:
            continue
        if doc.get("logger") == "lakegate.audit":
            out.append(doc)
    return out


def test_each_credential_grant_is_audited_without_secrets(
    info: dict[str, Any], new_table, tmp_path: Path
) -> None:
    table = new_table(prefix="audit")
    ns, name = table["namespace"], table["table"]["name"]
    (tmp_path / "tokens.yaml").write_text('"audit-caller-token-123": alice\n')
    env = stack_env(info) | {
        "LAKEGATE__CALLERS__MODE": "token",
        "LAKEGATE__CALLERS__TOKENS_FILE": str(tmp_path / "tokens.yaml"),
        "LAKEGATE__LOG__FORMAT": "json",
    }
    path = f"/v1/warehouses/demo/namespaces/{ns}/tables/{name}/credentials"
    auth = {"Authorization": "Bearer audit-caller-token-123"}
    with running_gateway(tmp_path, env, name="audit") as gw, httpx.Client(
        base_url=gw.http_url, trust_env=False, timeout=30
    ) as c:
        first = c.get(path, headers=auth)
        second = c.get(path + "?access=write", headers=auth)
        missing = c.get(path.replace(name, "no_such_table"), headers=auth)
        assert (first.status_code, second.status_code, missing.status_code) == (200, 200, 404)
        log = gw.log_text()
    every = _audit_lines(log)
    lines = [d for d in every if d["audit"] == "credential"]
    # the refused request has its `table` line too (a grant does not)
    assert [(d["caller"], d["table"], d["outcome"]) for d in every if d["audit"] == "table"] == [
        ("alice", "no_such_table", "404")]
    assert [(d["caller"], d["table"], d["access"]) for d in lines] == [
        ("alice", name, "read"), ("alice", name, "write"), ("alice", "no_such_table", "read"),
    ]
    assert [d["namespace"] for d in lines] == [ns, ns, ns]
    assert lines[0]["outcome"] == "miss"
    assert lines[2]["outcome"] == "NotFoundError"
    secrets = ["audit-caller-token-123"]
    for resp in (first, second):
        for cred in resp.json()["credentials"]:
            secrets += [v for k, v in cred["config"].items() if "secret" in k or "token" in k]
    assert len(secrets) > 1
    for line in every:
        for secret in secrets:
            assert secret not in json.dumps(line)
