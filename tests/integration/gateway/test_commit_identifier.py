"""Issue 50 item 6 on the real stack: the body of an Iceberg commit is the request.

Lakekeeper commits to the table the body's `identifier` names when the path has the branch shape
Spark sends (`determine_table_ident`, crates/lakekeeper/src/server/tables.rs): path namespace
`ns.orders`, any path table, identifier `ns` / `orders` commits `ns/orders`. The emulator
follows that rule, so the attack is shown to work against the catalog directly, and to fail
through a gateway whose policy lets paula write `ns.orders / x_public` only.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pyarrow as pa
import pytest
from pyiceberg.catalog.rest import RestCatalog

from devstack.bootstrap import fetch_token
from devstack.stack_info import StackInfo
from tests.gateway_process import stack_env, start_gateway
from tests.integration.gateway.conftest import MARK, ensure_namespace

pytestmark = pytest.mark.integration

PAULA = "paula-" + uuid.uuid4().hex  # a caller token: a secret
SCHEMA = pa.schema([pa.field("id", pa.int64())])


def _commit(prop: str, ns: str) -> dict[str, Any]:
    return {"identifier": {"namespace": [ns], "name": "orders"}, "requirements": [],
            "updates": [{"action": "set-properties", "updates": {prop: "1"}}]}


@pytest.fixture(scope="module")
def setup(info: StackInfo, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    run: Path = tmp_path_factory.mktemp("commit_identifier")
    ns = f"shared_{uuid.uuid4().hex[:6]}"
    with httpx.Client(base_url=info.gateway_url, trust_env=False, timeout=30,
                      headers=MARK) as devgw:
        ensure_namespace(devgw, ns)
    rest = RestCatalog("gateway", uri=info.gateway_url + "/catalog",
                       warehouse=info.warehouse.name, token="x",  # noqa: S106 - mode none
                       **{"header.X-Lakegate-Request": "1"})
    rest.create_table((ns, "orders"), schema=SCHEMA)
    (run / "tokens.json").write_text(json.dumps({PAULA: "paula"}))
    (run / "policy.yaml").write_text(
        "callers:\n"
        "  paula:\n"
        f"    - {{warehouse: demo, namespace: '{ns}.orders', table: x_public,"
        " access: [read, write]}\n")
    env = stack_env(info) | {
        "LAKEGATE__CALLERS__MODE": "token",
        "LAKEGATE__CALLERS__TOKENS_FILE": str(run / "tokens.json"),
        "LAKEGATE__CALLERS__POLICY_FILE": str(run / "policy.yaml"),
    }
    proc = start_gateway(run, env, name="commit_identifier")
    try:
        yield {"proc": proc, "ns": ns, "rest": rest}
    finally:
        rest.drop_table((ns, "orders"))
        assert proc.stop() == 0


def _properties(setup: dict[str, Any]) -> dict[str, str]:
    return dict(setup["rest"].load_table((setup["ns"], "orders")).properties)


def test_the_catalog_commits_a_branch_shaped_path_to_the_body_s_table(
        info: StackInfo, devstack: Any, setup: dict[str, Any]) -> None:
    """Not vacuous: the emulator, like Lakekeeper, changes `ns/orders` for this request."""
    client = info.idp.clients["direct"]
    token = fetch_token(info.idp.token_url, client.id, client.secret)
    ns = setup["ns"]
    path = f"/catalog/v1/{info.warehouse.id}/namespaces/{ns}%1Forders/tables/x_public"
    with httpx.Client(base_url=info.catalog.url, trust_env=False, timeout=30,
                      headers={"Authorization": f"Bearer {token}"}) as direct:
        resp = direct.post(path, json=_commit("direct_commit", ns))
        assert resp.status_code == 200, resp.text
        other = {**_commit("x", ns), "identifier": {"namespace": [ns], "name": "other"}}
        resp = direct.post(path, json=other)
        assert resp.status_code == 400
        assert resp.json()["error"]["type"] == "TableIdentifierMismatch"
    assert _properties(setup)["direct_commit"] == "1"


def test_through_the_gateway_the_policy_decides_on_the_body_s_table(
        setup: dict[str, Any]) -> None:
    ns = setup["ns"]
    with httpx.Client(base_url=setup["proc"].http_url, trust_env=False, timeout=30,
                      headers={"Authorization": f"Bearer {PAULA}"}) as paula:
        path = f"/catalog/v1/demo/namespaces/{ns}%1Forders/tables/x_public"
        resp = paula.post(path, json=_commit("paula_commit", ns))
        assert resp.status_code == 403, resp.text
        resp = paula.post(path, json={**_commit("x", ns),
                                      "identifier": {"namespace": [ns], "name": "other"}})
        assert resp.status_code == 400
        assert resp.json()["error"]["type"] == "TableIdentifierMismatch"
    assert "paula_commit" not in _properties(setup)
