"""Issue #35 finding 1 on the real stack: a `#` in a forwarded name cannot make the policy and
the catalog see different tables.

A token-mode gateway whose policy lets paula read tables named `*_public` only. Before the fix,
`GET /lakekeeper/v1/{wh}/namespaces/{ns}/generic-tables/private_x#_public` (client-managed, so
forwarded) was allowed as `private_x#_public` and answered by the catalog for `private_x`: 200
with `private_x`'s metadata, while `private_x` itself answered 404. The request is sent as raw
bytes: an HTTP client library would strip the `#` before sending.
"""

from __future__ import annotations

import json
import socket
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from devstack.stack_info import StackInfo
from tests.gateway_process import GatewayProcess, stack_env, start_gateway
from tests.integration.gateway.conftest import ensure_namespace

pytestmark = pytest.mark.integration

PAULA = "paula-" + uuid.uuid4().hex  # a caller token: a secret


@pytest.fixture(scope="module")
def setup(info: StackInfo, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict]:
    run: Path = tmp_path_factory.mktemp("forwarded_paths")
    ns = f"shared_{uuid.uuid4().hex[:6]}"
    with httpx.Client(base_url=info.gateway_url, trust_env=False, timeout=30,
                      headers={"X-Lakegate-Request": "1"}) as devgw:
        ensure_namespace(devgw, ns)
        for name in ("private_x", "open_public"):
            resp = devgw.post(f"/v1/warehouses/demo/namespaces/{ns}/tables",
                              json={"name": name, "format": "lance"})
            assert resp.status_code == 200, resp.text
    (run / "tokens.json").write_text(json.dumps({PAULA: "paula"}))
    (run / "policy.yaml").write_text(
        "callers:\n"
        "  paula:\n"
        f"    - {{warehouse: demo, namespace: {ns}, table: '*_public', access: [read]}}\n")
    env = stack_env(info) | {
        "LAKEGATE__CALLERS__MODE": "token",
        "LAKEGATE__CALLERS__TOKENS_FILE": str(run / "tokens.json"),
        "LAKEGATE__CALLERS__POLICY_FILE": str(run / "policy.yaml"),
    }
    proc = start_gateway(run, env, name="forwarded_paths")
    try:
        yield {"proc": proc, "ns": ns}
    finally:
        assert proc.stop() == 0


def _raw_get(proc: GatewayProcess, target: str) -> tuple[int, str]:
    """A client-managed GET with the target sent byte for byte; (status, body)."""
    port = int(proc.http_url.rsplit(":", 1)[1])
    payload = (f"GET {target} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
               f"Authorization: Bearer {PAULA}\r\n"
               "X-Iceberg-Access-Delegation: client-managed\r\n"
               "Connection: close\r\n\r\n").encode()
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        sock.sendall(payload)
        data = b""
        while chunk := sock.recv(65536):
            data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    return int(head.split(b" ", 2)[1]), body.decode(errors="replace")


def _generic(setup: dict, table: str) -> str:
    return f"/lakekeeper/v1/demo/namespaces/{setup['ns']}/generic-tables/{table}"


def test_the_policy_holds_without_tricks(setup: dict) -> None:
    """Not vacuous: paula reads `open_public` and not `private_x`."""
    status, body = _raw_get(setup["proc"], _generic(setup, "open_public"))
    assert status == 200, body
    assert json.loads(body)["table"]["name"] == "open_public"
    status, _ = _raw_get(setup["proc"], _generic(setup, "private_x"))
    assert status == 404


@pytest.mark.parametrize("table", ["private_x#_public", "private_x%23_public",
                                   "private_x%EF%BC%83_public"])
def test_a_hash_in_the_name_is_refused_not_forwarded_as_another_table(setup: dict,
                                                                      table: str) -> None:
    status, body = _raw_get(setup["proc"], _generic(setup, table))
    assert status == 400, body
    assert "private_x" not in body.replace(table, "")  # no metadata of the private table
    assert "'#' or '?'" in json.loads(body)["error"]["message"]
