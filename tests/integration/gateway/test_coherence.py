"""Two gateways, one catalog: a table replaced through node A is never served old by node B for
longer than `CACHE__IDENTITY_TTL_S`, and at once not when the caller names the new identity.

Node A is the stack's own gateway; node B is a second gateway process with a short identity TTL.
Both replacements of issue #27 are played: drop (purge) and create again, and rename away and
reuse the name. The emulator gives every new table a new id and location, as Lakekeeper does.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from devstack.stack_info import StackInfo
from tests.gateway_process import GatewayProcess, running_gateway, stack_env
from tests.integration.gateway.conftest import MARK

pytestmark = pytest.mark.integration

IDENTITY_TTL_S = 2.0


@pytest.fixture(scope="module")
def node_b(info: StackInfo, tmp_path_factory: pytest.TempPathFactory
           ) -> Iterator[httpx.Client]:
    env = stack_env(info) | {"LAKEGATE__CACHE__IDENTITY_TTL_S": str(IDENTITY_TTL_S)}
    run_dir: Path = tmp_path_factory.mktemp("node-b")
    gw: GatewayProcess
    with running_gateway(run_dir, env, name="node-b") as gw, httpx.Client(
        base_url=gw.http_url, headers=MARK, timeout=30, trust_env=False
    ) as client:
        yield client


def _creds(node: httpx.Client, ns: str, name: str, **params: str) -> httpx.Response:
    return node.get(f"/v1/warehouses/demo/namespaces/{ns}/tables/{name}/credentials",
                    params=params)


def _location(node: httpx.Client, ns: str, name: str, **params: str) -> dict[str, Any]:
    resp = _creds(node, ns, name, **params)
    assert resp.status_code == 200, resp.text
    doc: dict[str, Any] = resp.json()
    return doc


def _create(gw: httpx.Client, ns: str, name: str) -> str:
    resp = gw.post(f"/v1/warehouses/demo/namespaces/{ns}/tables",
                   json={"name": name, "format": "lance"})
    assert resp.status_code == 200, resp.text
    return str(resp.json()["table"]["base_location"])


def _table_id(gw: httpx.Client, ns: str, name: str) -> str:
    ids: list[str] = []
    token: str | None = None
    for _ in range(50):  # the shared namespace holds every test's tables: page through it
        params = {"page_size": "1000", **({"page_token": token} if token else {})}
        resp = gw.get(f"/v1/warehouses/demo/namespaces/{ns}/tables", params=params)
        assert resp.status_code == 200, resp.text
        ids += [i["id"] for i in resp.json()["identifiers"] if i["name"] == name]
        token = resp.json()["next_page_token"]
        if not token:
            break
    assert len(ids) == 1
    return str(ids[0])


def _drop_and_recreate(gw: httpx.Client, ns: str, name: str) -> str:
    assert gw.delete(f"/v1/warehouses/demo/namespaces/{ns}/tables/{name}",
                     params={"purge": "true"}).status_code == 204
    return _create(gw, ns, name)


def _rename_and_reuse(gw: httpx.Client, ns: str, name: str) -> str:
    resp = gw.post("/v1/warehouses/demo/tables/rename", json={
        "source": {"namespace": [ns], "name": name},
        "destination": {"namespace": [ns], "name": name + "_old"}})
    assert resp.status_code == 204, resp.text
    return _create(gw, ns, name)


@pytest.mark.parametrize("replace", [_drop_and_recreate, _rename_and_reuse],
                         ids=["drop-recreate", "rename-reuse"])
def test_node_b_serves_the_replaced_table_within_the_identity_ttl(
    gw: httpx.Client, node_b: httpx.Client, new_table: Any, replace: Any
) -> None:
    table = new_table(prefix="coh")
    ns, name = table["namespace"], table["table"]["name"]
    old = table["table"]["base_location"]
    first = _location(node_b, ns, name)
    served_at = time.monotonic()
    assert (first["location"], first["outcome"]) == (old, "miss")

    new = replace(gw, ns, name)  # through node A: node B hears nothing of it
    assert new.rstrip("/") != old.rstrip("/")

    # Inside the bound node B may still answer the old table (this is what the TTL bounds)...
    early = _location(node_b, ns, name)
    if time.monotonic() - served_at < IDENTITY_TTL_S:
        assert early["location"] in (old, new)
    # ...and once the TTL since its fetch has passed, never again.
    time.sleep(max(0.0, served_at + IDENTITY_TTL_S - time.monotonic()) + 0.05)
    later = _location(node_b, ns, name)
    assert later["location"] == new
    assert later["credentials"][0]["prefix"].rstrip("/") == new.rstrip("/")
    assert later["outcome"] == "miss"  # the old entry was dropped and refetched


@pytest.mark.parametrize("replace", [_drop_and_recreate, _rename_and_reuse],
                         ids=["drop-recreate", "rename-reuse"])
def test_expected_location_is_served_at_once_and_the_old_one_refused(
    gw: httpx.Client, node_b: httpx.Client, new_table: Any, replace: Any
) -> None:
    table = new_table(prefix="coh")
    ns, name = table["namespace"], table["table"]["name"]
    old = table["table"]["base_location"]
    assert _location(node_b, ns, name)["location"] == old  # node B caches the old table

    new = replace(gw, ns, name)
    started = time.monotonic()
    doc = _location(node_b, ns, name, expected_location=new)
    assert time.monotonic() - started < IDENTITY_TTL_S  # no waiting for the TTL
    assert (doc["location"], doc["outcome"]) == (new, "miss")
    assert doc["credentials"][0]["prefix"].rstrip("/") == new.rstrip("/")

    # A task still planned against the replaced table is refused, not handed the old prefix.
    stale = _creds(node_b, ns, name, expected_location=old, access="write")
    assert stale.status_code == 409, stale.text
    assert stale.json()["error"]["type"] == "TableIdentityMismatch"


def test_table_id_is_confirmed_and_a_replaced_id_refused(
    gw: httpx.Client, node_b: httpx.Client, new_table: Any
) -> None:
    table = new_table(prefix="cohid")
    ns, name = table["namespace"], table["table"]["name"]
    old_id = _table_id(gw, ns, name)
    doc = _location(node_b, ns, name, table_id=old_id)
    assert doc["table_id"] == old_id.lower()
    _drop_and_recreate(gw, ns, name)
    new_id = _table_id(gw, ns, name)
    assert new_id != old_id
    doc = _location(node_b, ns, name, table_id=new_id)
    assert doc["table_id"] == new_id.lower()
    assert doc["location"] == _location(gw, ns, name)["location"]
    assert _creds(node_b, ns, name, table_id=old_id).status_code == 409


def _metric(node: httpx.Client, sample: str) -> float:
    for line in node.get("/metrics").text.splitlines():
        if line.startswith(sample + " "):
            return float(line.split()[1])
    return 0.0


def test_an_iceberg_table_is_rechecked_with_if_none_match_and_replaced(
    info: StackInfo, node_b: httpx.Client
) -> None:
    from pyiceberg.catalog.rest import RestCatalog
    from pyiceberg.schema import Schema
    from pyiceberg.types import LongType, NestedField

    rest = RestCatalog("node-a", uri=info.gateway_url + "/catalog", warehouse=info.warehouse.name,
                       token="x",  # noqa: S106 - the stack gateway takes any local bearer
                       **{"header.X-Iceberg-Access-Delegation": "vended-credentials",
                          "header.X-Lakegate-Request": "1"})
    schema = Schema(NestedField(1, "id", LongType(), required=False))
    ident = (info.namespace, f"cohice_{time.monotonic_ns() % 10**9}")
    first = rest.create_table(ident, schema=schema)
    ns, name = ident
    try:
        doc = _location(node_b, ns, name, kind="iceberg")
        assert doc["location"].rstrip("/") == first.location().rstrip("/")
        not_modified = _metric(node_b, 'lakegate_identity_checks_total{result="not_modified"}')
        for _ in range(2):  # two re-checks: the second is answered 304 (same ETag)
            time.sleep(IDENTITY_TTL_S + 0.05)
            doc = _location(node_b, ns, name, kind="iceberg")
            assert doc["outcome"] == "hit"
        assert doc["table_id"] == str(first.metadata.table_uuid)
        assert _metric(node_b,
                       'lakegate_identity_checks_total{result="not_modified"}') > not_modified
        rest.drop_table(ident)
        second = rest.create_table(ident, schema=schema)
        assert second.location() != first.location()
        time.sleep(IDENTITY_TTL_S + 0.05)
        doc = _location(node_b, ns, name, kind="iceberg")
        assert doc["location"].rstrip("/") == second.location().rstrip("/")
        assert doc["table_id"] == str(second.metadata.table_uuid)
    finally:
        rest.drop_table(ident)
