"""Iceberg table routes: metadata forwarded, credentials merged from the cache, policy applied."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from gateway.metrics import Metrics
from gateway.models import (
    AccessMode,
    CredentialSet,
    GenericTable,
    RequestContext,
    StorageCredential,
    TableRef,
    UpstreamResponse,
)
from gateway.surfaces import iceberg_etag
from gateway.surfaces.policy import CallerPolicy, parse_rules
from tests.unit.surfaces.conftest import AUTH, VENDED, MakeClient, count
from tests.unit.surfaces.fake_operations import WAREHOUSE, FakeOperations

TABLE = "/catalog/v1/demo/namespaces/demo_ns/tables/orders"
LOCATION = "s3://warehouse/demo_ns/orders"
CATALOG_REFRESH = (f"http://catalog:8181/catalog/v1/{WAREHOUSE.id}/namespaces/demo_ns/tables/"
                   "orders/credentials")
READ_ONLY = CallerPolicy(parse_rules({"callers": {"*": [
    {"warehouse": "demo", "namespace": "*", "table": "*", "access": "read"}]}}, "t"))


def _metadata_doc(location: str = LOCATION) -> dict[str, Any]:
    return {"metadata-location": f"{location}/metadata/00001-x.metadata.json",
            "metadata": {"format-version": 2, "location": location},
            "config": {"s3.region": "us-east-1", "region": "us-east-1"}}


@dataclass
class IcebergOps(FakeOperations):
    """FakeOperations whose catalog answers Iceberg calls from `answers` and records them."""

    answers: dict[str, tuple[int, dict[str, Any]]] = field(default_factory=dict)
    sent: list[tuple[str, str, bytes | None, dict[str, str]]] = field(default_factory=list)
    prefix: str = LOCATION

    def credential_set(self, table: GenericTable) -> CredentialSet:
        base = super().credential_set(table)
        cred = base.credentials[0]
        config = {**cred.config, "client.refresh-credentials-endpoint": CATALOG_REFRESH}
        new = StorageCredential(prefix=self.prefix, config=config,
                                expires_at_ms=cred.expires_at_ms)
        return CredentialSet(credentials=(new,), expires_at_ms=base.expires_at_ms,
                             location=self.prefix)

    async def forward(self, method: str, path: str, query: str, body: bytes | None,
                      ctx: RequestContext, headers: Any = None) -> UpstreamResponse:
        await self._enter("forward", ctx)
        self.forwarded.append((method, path, query))
        self.sent.append((method, path, body, dict(headers or {})))
        status, doc = self.answers.get(method, (200, _metadata_doc()))
        return UpstreamResponse(status=status,
                                headers={"Content-Type": "application/json", "ETag": '"lk2.x"'},
                                body=json.dumps(doc).encode())


def _ops() -> IcebergOps:
    ops = IcebergOps()
    ops.add_table(("demo_ns",), "orders")
    return ops


async def test_vended_load_forwards_client_managed_and_merges_cached_credentials(
    make_client: MakeClient,
) -> None:
    ops = _ops()
    client = await make_client(ops=ops)
    resp = await client.get(TABLE, headers=VENDED)
    assert resp.status == 200
    doc = await resp.json()
    method, path, _, headers = ops.sent[-1]
    assert (method, path) == ("GET", f"/catalog/v1/{WAREHOUSE.id}/namespaces/demo_ns/tables/orders")
    assert headers == {"X-Iceberg-Access-Delegation": "client-managed"}
    assert doc["metadata"]["location"] == LOCATION
    [cred] = doc["storage-credentials"]
    assert cred["prefix"] == LOCATION
    assert cred["config"]["s3.session-token-expires-at-ms"]
    # the refresh endpoint names the gateway (this test server), same path
    host = f"http://{client.server.host}:{client.server.port}"
    assert cred["config"]["client.refresh-credentials-endpoint"] == (
        host + CATALOG_REFRESH.removeprefix("http://catalog:8181"))
    # `config`: the catalog's keys plus the raw credential keys, no expiry, no refresh URL
    assert doc["config"]["region"] == "us-east-1"
    assert doc["config"]["s3.access-key-id"] == cred["config"]["s3.access-key-id"]
    assert "s3.session-token-expires-at-ms" not in doc["config"]
    assert "client.refresh-credentials-endpoint" not in doc["config"]
    assert ops.calls["get_credentials"] == 1
    assert ops.accesses == [AccessMode.WRITE]
    # the catalog's tag described another body: the merged one carries the gateway's own tag,
    # which names the catalog's (gateway/surfaces/iceberg_etag.py)
    tag = iceberg_etag.parse(resp.headers["ETag"])
    assert tag is not None
    assert tag.upstream == '"lk2.x"'
    assert tag.access is AccessMode.WRITE


async def test_client_managed_load_asks_no_credentials(make_client: MakeClient) -> None:
    ops = _ops()
    client = await make_client(ops=ops)
    resp = await client.get(TABLE, headers={**AUTH, "X-Iceberg-Access-Delegation":
                                            "client-managed"})
    assert resp.status == 200
    assert "storage-credentials" not in await resp.json()
    assert ops.calls["get_credentials"] == 0


async def test_read_only_caller_gets_read_credentials(make_client: MakeClient) -> None:
    ops = _ops()
    client = await make_client(ops=ops, policy=READ_ONLY)
    assert (await client.get(TABLE, headers=VENDED)).status == 200
    assert (await client.get(TABLE + "/credentials", headers=AUTH)).status == 200
    assert ops.accesses == [AccessMode.READ, AccessMode.READ]


async def test_missing_table_passes_the_catalog_404_through_as_not_found(
    make_client: MakeClient, metrics: Metrics
) -> None:
    ops = _ops()
    ops.answers["GET"] = (404, {"error": {"message": "Table does not exist",
                                          "type": "NoSuchTableException", "code": 404}})
    client = await make_client(ops=ops)
    resp = await client.get(TABLE, headers=VENDED)
    assert resp.status == 404
    assert (await resp.json())["error"]["type"] == "NoSuchTableException"
    # A load before the create (pyiceberg's create-if-absent) is an answer, not a fault.
    assert count(metrics, "rest", "credential", "not_found") == 1
    assert count(metrics, "rest", "credential", "error") == 0


async def test_a_credential_for_another_location_is_dropped_and_fetched_again(
    make_client: MakeClient,
) -> None:
    ops = _ops()
    ops.prefix = "s3://warehouse/old-location"
    client = await make_client(ops=ops)
    resp = await client.get(TABLE, headers=VENDED)
    assert resp.status == 200
    assert ops.calls["get_credentials"] == 2
    assert [r.kind for r in ops.invalidated if r is not None] == ["iceberg"]


def test_load_config_takes_the_credential_covering_the_location_on_a_slash_boundary() -> None:
    # #33 finding 7: `s3://b/t` was taken for `s3://b/t2` (the longest prefix by `startswith`).
    from gateway.surfaces.http_iceberg import load_config

    creds = [{"prefix": "s3://b/", "config": {"s3.access-key-id": "bucket"}},
             {"prefix": "s3://b/t", "config": {"s3.access-key-id": "other-table"}}]
    assert load_config({}, creds, "s3://b/t2")["s3.access-key-id"] == "bucket"
    assert load_config({}, creds, "s3://b/t/x")["s3.access-key-id"] == "other-table"


async def test_credentials_endpoint_is_answered_from_the_cache(make_client: MakeClient) -> None:
    ops = _ops()
    client = await make_client(ops=ops)
    resp = await client.get(TABLE + "/credentials", headers=AUTH)
    assert resp.status == 200
    doc = await resp.json()
    assert list(doc) == ["storage-credentials"]
    refresh = doc["storage-credentials"][0]["config"]["client.refresh-credentials-endpoint"]
    assert refresh.startswith(f"http://{client.server.host}:{client.server.port}/catalog/v1/")
    assert ops.forwarded == []


async def test_commit_is_forwarded_and_needs_write(make_client: MakeClient) -> None:
    ops = _ops()
    body = {"requirements": [{"type": "assert-table-uuid", "uuid": "u"}],
            "updates": [{"action": "set-properties", "updates": {"a": "b"}}]}
    client = await make_client(ops=ops, policy=READ_ONLY)
    resp = await client.post(TABLE, json=body, headers=AUTH)
    assert resp.status == 403
    assert ops.forwarded == []
    client = await make_client(ops=ops)
    resp = await client.post(TABLE, json=body, headers=AUTH)
    assert resp.status == 200
    method, _, sent, _ = ops.sent[-1]
    assert method == "POST"
    assert json.loads(sent or b"") == body
    assert ops.invalidated == []  # a commit that keeps the location keeps the credentials


async def test_commit_that_moves_the_table_invalidates_its_credentials(
    make_client: MakeClient,
) -> None:
    ops = _ops()
    client = await make_client(ops=ops)
    body = {"updates": [{"action": "set-location", "location": "s3://warehouse/new"}]}
    assert (await client.post(TABLE, json=body, headers=AUTH)).status == 200
    assert [(r.name, r.kind) for r in ops.invalidated if r is not None] == [("orders", "iceberg")]


async def test_commit_conflict_is_passed_through(make_client: MakeClient) -> None:
    ops = _ops()
    ops.answers["POST"] = (409, {"error": {"message": "Commit failed", "code": 409,
                                           "type": "CommitFailedException"}})
    client = await make_client(ops=ops)
    resp = await client.post(TABLE, json={"requirements": [], "updates": []}, headers=AUTH)
    assert resp.status == 409
    assert (await resp.json())["error"]["type"] == "CommitFailedException"


async def test_hostile_commit_body_is_refused_before_the_catalog(make_client: MakeClient) -> None:
    ops = _ops()
    client = await make_client(ops=ops)
    for body in (b"{not json", b"[1, 2]", b'{"a": ' * 5000 + b"1" + b"}" * 5000):
        resp = await client.post(TABLE, data=body, headers={**AUTH,
                                                            "Content-Type": "application/json"})
        assert resp.status == 400
    assert ops.forwarded == []


async def test_create_is_forwarded_with_the_callers_delegation_and_invalidates(
    make_client: MakeClient,
) -> None:
    ops = _ops()
    ops.answers["POST"] = (200, {**_metadata_doc(), "storage-credentials": [
        {"prefix": LOCATION, "config": {"client.refresh-credentials-endpoint": CATALOG_REFRESH}}]})
    client = await make_client(ops=ops)
    resp = await client.post("/catalog/v1/demo/namespaces/demo_ns/tables",
                             json={"name": "orders", "schema": {"type": "struct", "fields": []}},
                             headers=VENDED)
    assert resp.status == 200
    refresh = (await resp.json())["storage-credentials"][0]["config"][
        "client.refresh-credentials-endpoint"]
    assert refresh.startswith(f"http://{client.server.host}:{client.server.port}/")
    assert ops.sent[-1][3] == {}  # the caller's delegation header is not replaced
    assert len(ops.invalidated) == 2  # before (a re-created table) and after


async def test_create_needs_a_name_and_write_access(make_client: MakeClient) -> None:
    ops = _ops()
    client = await make_client(ops=ops)
    path = "/catalog/v1/demo/namespaces/demo_ns/tables"
    assert (await client.post(path, json={"name": 3}, headers=AUTH)).status == 400
    client = await make_client(ops=ops, policy=READ_ONLY)
    assert (await client.post(path, json={"name": "t"}, headers=AUTH)).status == 403
    assert ops.forwarded == []


async def test_drop_and_rename_invalidate_every_name_involved(make_client: MakeClient) -> None:
    ops = _ops()
    client = await make_client(ops=ops)
    assert (await client.delete(TABLE, headers=AUTH)).status == 200
    body = {"source": {"namespace": ["demo_ns"], "name": "a"},
            "destination": {"namespace": ["other"], "name": "b"}}
    assert (await client.post("/catalog/v1/demo/tables/rename", json=body,
                              headers=AUTH)).status == 200
    names = [(r.namespace, r.name) for r in ops.invalidated if isinstance(r, TableRef)]
    assert names == [(("demo_ns",), "orders"), (("demo_ns",), "a"), (("other",), "b")]
    bad = {"source": {"namespace": "demo_ns", "name": "a"}, "destination": body["destination"]}
    resp = await client.post("/catalog/v1/demo/tables/rename", json=bad, headers=AUTH)
    assert resp.status == 400


async def test_list_and_exists_are_forwarded_under_the_policy(make_client: MakeClient) -> None:
    ops = _ops()
    ops.answers["GET"] = (200, {"identifiers": [{"namespace": ["demo_ns"], "name": "orders"}]})
    client = await make_client(ops=ops)
    resp = await client.get("/catalog/v1/demo/namespaces/demo_ns/tables", headers=AUTH)
    assert (await resp.json())["identifiers"][0]["name"] == "orders"
    ops.answers["HEAD"] = (204, {})
    resp = await client.head(TABLE, headers=AUTH)
    assert resp.status == 204
    assert [m for m, _, _ in ops.forwarded] == ["GET", "HEAD"]
    deny = CallerPolicy(parse_rules({"callers": {"*": [
        {"warehouse": "demo", "namespace": "other", "table": "*", "access": "read"}]}}, "t"))
    client = await make_client(ops=ops, policy=deny)
    assert (await client.head(TABLE, headers=AUTH)).status in (403, 404)
    assert len(ops.forwarded) == 2


async def test_native_credentials_route_takes_kind_iceberg(make_client: MakeClient) -> None:
    refs: list[TableRef] = []

    class Recording(IcebergOps):
        async def get_credentials(self, ref: TableRef, access: AccessMode,
                                  ctx: RequestContext, *, expect: Any = None) -> Any:
            refs.append(ref)
            return await super().get_credentials(ref, access, ctx, expect=expect)

    ops = Recording()
    ops.add_table(("demo_ns",), "orders")
    client = await make_client(ops=ops)
    path = "/v1/warehouses/demo/namespaces/demo_ns/tables/orders/credentials"
    assert (await client.get(path + "?kind=iceberg", headers=AUTH)).status == 200
    assert (await client.get(path, headers=AUTH)).status == 200
    assert [r.kind for r in refs] == ["iceberg", "generic"]
    resp = await client.get(path + "?kind=delta", headers=AUTH)
    assert resp.status == 400
    assert len(refs) == 2


async def test_load_of_a_missing_table_asks_no_credentials(make_client: MakeClient) -> None:
    ops = _ops()
    ops.answers["GET"] = (404, {"error": {"message": "Table does not exist",
                                          "type": "NoSuchTableException", "code": 404}})
    client = await make_client(ops=ops)
    assert (await client.get(TABLE, headers=VENDED)).status == 404
    assert ops.calls["get_credentials"] == 0


async def test_a_hash_in_a_forwarded_table_name_is_a_400_in_lakekeepers_envelope(
    make_client: MakeClient,
) -> None:
    ops = _ops()
    client = await make_client(ops=ops)
    resp = await client.delete("/catalog/v1/demo/namespaces/demo_ns/tables/orders%23_public",
                               headers=AUTH)
    assert resp.status == 400
    doc = await resp.json()
    assert doc["error"]["code"] == 400
    assert "'#' or '?'" in doc["error"]["message"]
    assert ops.sent == []



BRANCH_PATH = "/catalog/v1/demo/namespaces/shared%1Forders/tables/branch_main"
SHARED_ORDERS = {"namespace": ["shared"], "name": "orders"}


async def test_a_branch_shaped_commit_goes_to_the_table_its_body_names(
    make_client: MakeClient,
) -> None:
    """Lakekeeper's rule: path namespace `shared.orders`, any path table, identifier
    `shared / orders` commits `shared/orders`; the gateway decides on that table and forwards
    to its own path, so the catalog is asked to change exactly the table the policy allowed."""
    ops = _ops()
    only_orders = CallerPolicy(parse_rules({"callers": {"*": [
        {"warehouse": "demo", "namespace": "shared", "table": "orders", "access": "write"}]}},
        "t"))
    client = await make_client(ops=ops, policy=only_orders)
    body = {"identifier": SHARED_ORDERS, "requirements": [], "updates": []}
    resp = await client.post(BRANCH_PATH, json=body, headers=AUTH)
    assert resp.status == 200
    method, path, sent, _ = ops.sent[-1]
    assert (method, path) == ("POST", f"/catalog/v1/{WAREHOUSE.id}/namespaces/shared/tables/orders")
    assert json.loads(sent or b"")["identifier"] == SHARED_ORDERS
    # the same request to a path the policy allows, naming a table it does not: refused
    only_branch = CallerPolicy(parse_rules({"callers": {"*": [
        {"warehouse": "demo", "namespace": "shared.orders", "table": "*", "access": "write"}]}},
        "t"))
    client = await make_client(ops=ops, policy=only_branch)
    assert (await client.post(BRANCH_PATH, json=body, headers=AUTH)).status == 403
    assert len(ops.sent) == 1


async def test_a_commit_naming_another_table_is_lakekeepers_400_before_the_catalog(
    make_client: MakeClient,
) -> None:
    ops = _ops()
    client = await make_client(ops=ops)
    for ident in ({"namespace": ["demo_ns"], "name": "customers"},
                  {"namespace": ["other"], "name": "orders"},
                  {"namespace": ["demo_ns"], "name": "Orders"},  # exact, as Lakekeeper compares
                  {"namespace": "demo_ns", "name": "orders"},
                  {"namespace": ["demo_ns"], "name": ".."}):
        resp = await client.post(TABLE, json={"identifier": ident, "updates": []},
                                 headers=AUTH)
        assert resp.status == 400, ident
        assert (await resp.json())["error"]["code"] == 400
    resp = await client.post(TABLE, json={"identifier": {"namespace": ["demo_ns"],
                                                         "name": "customers"}}, headers=AUTH)
    assert (await resp.json())["error"]["type"] == "TableIdentifierMismatch"
    # not the branch shape: a one-level path namespace has no table in it
    resp = await client.post("/catalog/v1/demo/namespaces/orders/tables/branch_main",
                             json={"identifier": {"namespace": [], "name": "orders"}},
                             headers=AUTH)
    assert resp.status == 400
    assert ops.sent == []
    # the path's own table, spelt with `+` in the path as Spark does, is the same table
    ops.add_table(("demo_ns",), "my orders")
    resp = await client.post("/catalog/v1/demo/namespaces/demo_ns/tables/my+orders",
                             json={"identifier": {"namespace": ["demo_ns"], "name": "my orders"}},
                             headers=AUTH)
    assert resp.status == 200


async def test_a_rename_forwards_the_body_it_decided_on(make_client: MakeClient) -> None:
    ops = _ops()
    client = await make_client(ops=ops)
    body = (b'{"source": {"namespace": ["demo_ns"], "name": "a"}, "destination": '
            b'{"namespace": ["demo_ns"], "name": "b", "extra": 1}}')
    resp = await client.post("/catalog/v1/demo/tables/rename", data=body,
                             headers={**AUTH, "Content-Type": "application/json"})
    assert resp.status == 200
    assert json.loads(ops.sent[-1][2] or b"") == {
        "source": {"namespace": ["demo_ns"], "name": "a"},
        "destination": {"namespace": ["demo_ns"], "name": "b"}}
