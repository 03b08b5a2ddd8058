"""Table audit lines (gateway/audit.py `TableNotes`): every request that is not a credential
request and names a table is audited with its caller, the folded names and its outcome, on every
surface (issue #35, finding 7: forwarded drops, commits, creates and renames were never
audited)."""

from __future__ import annotations

import io
import json
from typing import Any

import grpc
import pytest

from gateway.audit import configure_audit
from gateway.surfaces.callers import StaticTokenCallerAuth
from gateway.surfaces.policy import CallerPolicy, parse_rules
from tests.unit.surfaces.conftest import MakeClient
from tests.unit.surfaces.fake_operations import FakeOperations
from tests.unit.surfaces.test_http_iceberg import IcebergOps

TOKENS = {"tok-alice-123": "alice"}
ALICE = {"Authorization": "Bearer tok-alice-123"}
NATIVE = "/v1/warehouses/Demo/namespaces/DEMO_NS/tables"
ICEBERG = "/catalog/v1/Demo/namespaces/DEMO_NS/tables/Orders"
READ_ONLY = CallerPolicy(parse_rules({"callers": {"*": [
    {"warehouse": "demo", "namespace": "*", "table": "*", "access": "read"}]}}, "t"))


def table_lines(stream: io.StringIO) -> list[dict[str, Any]]:
    return [d for d in map(json.loads, stream.getvalue().splitlines()) if d.get("audit") == "table"]


def summary(doc: dict[str, Any]) -> tuple[Any, ...]:
    return (doc["caller"], doc["method"], doc["warehouse"], doc["namespace"], doc["table"],
            doc["access"], doc["outcome"])


async def test_native_create_rename_and_drop_are_audited_in_the_folded_form(
    make_client: MakeClient, audit_stream: io.StringIO,
) -> None:
    configure_audit(True)
    client = await make_client(auth=StaticTokenCallerAuth(TOKENS))
    assert (await client.post(NATIVE, json={"name": "T1", "format": "lance"},
                              headers=ALICE)).status == 200
    assert (await client.post("/v1/warehouses/Demo/tables/rename", headers=ALICE, json={
        "source": {"namespace": ["DEMO_NS"], "name": "T1"},
        "destination": {"namespace": ["demo_ns"], "name": "T2"}})).status == 204
    assert (await client.delete(f"{NATIVE}/t2", headers=ALICE)).status == 204
    assert (await client.delete(f"{NATIVE}/t2", headers=ALICE)).status == 404
    assert [summary(d) for d in table_lines(audit_stream)] == [
        ("alice", "POST", "demo", "demo_ns", "t1", "write", "200"),
        ("alice", "POST", "demo", "demo_ns", "t1", "write", "204"),  # rename: both tables
        ("alice", "POST", "demo", "demo_ns", "t2", "write", "204"),
        ("alice", "DELETE", "demo", "demo_ns", "t2", "write", "204"),
        ("alice", "DELETE", "demo", "demo_ns", "t2", "write", "404"),
    ]
    assert all(d["surface"] == "http" and d["request_id"] for d in table_lines(audit_stream))
    assert "tok-alice-123" not in audit_stream.getvalue()


async def test_forwarded_iceberg_commits_and_drops_are_audited_with_the_catalogs_outcome(
    make_client: MakeClient, audit_stream: io.StringIO,
) -> None:
    configure_audit(True)
    ops = IcebergOps()
    ops.add_table(("demo_ns",), "orders")
    client = await make_client(ops=ops, auth=StaticTokenCallerAuth(TOKENS))
    body = {"requirements": [], "updates": []}
    assert (await client.post(ICEBERG, json=body, headers=ALICE)).status == 200
    ops.answers["POST"] = (409, {"error": {"message": "Commit failed", "code": 409,
                                           "type": "CommitFailedException"}})
    assert (await client.post(ICEBERG, json=body, headers=ALICE)).status == 409
    ops.answers["DELETE"] = (204, {})
    await client.delete(ICEBERG, headers=ALICE)
    lines = table_lines(audit_stream)
    assert [summary(d) for d in lines] == [
        ("alice", "POST", "demo", "demo_ns", "orders", "write", "200"),
        ("alice", "POST", "demo", "demo_ns", "orders", "write", "409"),
        ("alice", "DELETE", "demo", "demo_ns", "orders", "write", "204"),
    ]
    assert {d["surface"] for d in lines} == {"rest"}


async def test_a_refused_drop_is_audited_too(
    make_client: MakeClient, audit_stream: io.StringIO,
) -> None:
    configure_audit(True)
    ops = IcebergOps()
    client = await make_client(ops=ops, policy=READ_ONLY, auth=StaticTokenCallerAuth(TOKENS))
    assert (await client.delete(ICEBERG, headers=ALICE)).status == 403
    assert ops.forwarded == []
    assert [summary(d) for d in table_lines(audit_stream)] == [
        ("alice", "DELETE", "demo", "demo_ns", "orders", "write", "403")]


async def test_a_credential_grant_is_left_to_the_service_and_a_failure_is_audited(
    make_client: MakeClient, fake_ops: FakeOperations, audit_stream: io.StringIO,
) -> None:
    """A granted credential has its own `credential` line; no `table` line doubles it. A
    refused or failed one gets a table line whichever layer raised (a vended load's missing
    table was audited nowhere)."""
    configure_audit(True)
    client = await make_client(auth=StaticTokenCallerAuth(TOKENS))
    creds = "/v1/warehouses/demo/namespaces/demo_ns/tables/{}/credentials"
    assert (await client.get(creds.format("orders"), headers=ALICE)).status == 200
    assert table_lines(audit_stream) == []
    assert (await client.get(creds.format("Missing"), headers=ALICE)).status == 404
    lake = "/lakekeeper/v1/demo/namespaces/demo_ns/generic-tables/Missing?vended=true"
    resp = await client.get(lake, headers={**ALICE, "X-Iceberg-Access-Delegation":
                                           "vended-credentials"})
    assert resp.status == 404
    assert [(d["table"], d["outcome"]) for d in table_lines(audit_stream)] == [
        ("missing", "404"), ("missing", "404")]


async def test_grpc_drop_is_audited_with_its_code(
    server_factory: Any, fake_ops: FakeOperations, audit_stream: io.StringIO,
) -> None:
    from lakegate.v1 import catalog_pb2, common_pb2

    configure_audit(True)
    server = await server_factory(auth=StaticTokenCallerAuth(TOKENS))
    ref = common_pb2.TableRef(warehouse="Demo", namespace=["DEMO_NS"], name="Orders")
    md = (("authorization", "Bearer tok-alice-123"),)
    await server.catalog.DropTable(catalog_pb2.DropTableRequest(table=ref), metadata=md,
                                   timeout=5)
    with pytest.raises(grpc.aio.AioRpcError):
        await server.catalog.DropTable(catalog_pb2.DropTableRequest(table=ref), metadata=md,
                                       timeout=5)
    assert [summary(d) for d in table_lines(audit_stream)] == [
        ("alice", "DropTable", "demo", "demo_ns", "orders", "write", "OK"),
        ("alice", "DropTable", "demo", "demo_ns", "orders", "write", "NOT_FOUND"),
    ]
    assert {d["surface"] for d in table_lines(audit_stream)} == {"grpc"}


async def test_a_branch_shaped_commit_is_decided_and_audited_on_the_table_its_body_names(
    make_client: MakeClient, audit_stream: io.StringIO,
) -> None:
    """Issue 50 item 6: Lakekeeper commits `shared.orders / x_public` with the body identifier
    `shared / orders` to `shared/orders`; a caller allowed only the path's table is refused,
    and the audit line names the table the catalog would have changed."""
    configure_audit(True)
    ops = IcebergOps()
    policy = CallerPolicy(parse_rules({"callers": {"*": [
        {"warehouse": "demo", "namespace": "shared.orders", "table": "x_public",
         "access": "write"}]}}, "t"))
    client = await make_client(ops=ops, policy=policy, auth=StaticTokenCallerAuth(TOKENS))
    body = {"identifier": {"namespace": ["shared"], "name": "orders"},
            "requirements": [], "updates": []}
    resp = await client.post("/catalog/v1/demo/namespaces/shared%1Forders/tables/x_public",
                             json=body, headers=ALICE)
    assert resp.status == 403
    assert ops.forwarded == []
    assert [summary(d) for d in table_lines(audit_stream)] == [
        ("alice", "POST", "demo", "shared", "orders", "write", "403")]
