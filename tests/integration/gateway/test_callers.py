"""Caller auth and policy on every surface, against a token-mode gateway on the real stack.

alice may use namespace team_a_* only; the same refusal must hold on the native HTTP API, gRPC,
the Lakekeeper-compatible surface (pylakekeeper) and the AWS container endpoint. At the end, the
gateway's whole log (DEBUG) is scanned for every secret planted or served during the run.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path

import boto3
import grpc
import httpx
import pytest
from botocore.exceptions import ClientError
from pylakekeeper import Client, LakekeeperHTTPError, StaticToken

from devstack.stack_info import StackInfo
from lakegate.v1 import common_pb2, credentials_pb2, credentials_pb2_grpc
from tests.gateway_process import GatewayProcess, stack_env, start_gateway
from tests.integration.gateway.conftest import ensure_namespace

pytestmark = pytest.mark.integration

ALICE = "alice-" + uuid.uuid4().hex  # caller tokens: secrets that must never be logged
ADMIN = "admin-" + uuid.uuid4().hex
READER = "reader-" + uuid.uuid4().hex


@pytest.fixture(scope="module")
def setup(info: StackInfo, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict]:
    run = tmp_path_factory.mktemp("callers")
    suffix = uuid.uuid4().hex[:6]
    ns_a, ns_b = f"team_a_{suffix}", f"team_b_{suffix}"
    with httpx.Client(base_url=info.gateway_url, trust_env=False, timeout=30,
                      headers={"X-Lakegate-Request": "1"}) as devgw:
        for ns in (ns_a, ns_b):
            ensure_namespace(devgw, ns)
            resp = devgw.post(f"/v1/warehouses/demo/namespaces/{ns}/tables",
                              json={"name": "tbl", "format": "lance"})
            assert resp.status_code == 200, resp.text
    (run / "tokens.json").write_text(json.dumps({ALICE: "alice", ADMIN: "admin",
                                                 READER: "reader"}))
    (run / "policy.yaml").write_text(
        "callers:\n"
        "  alice:\n"
        "    - {warehouse: demo, namespace: 'team_a_*', table: '*', access: [read, write]}\n"
        "  admin:\n    - {warehouse: '*', namespace: '*', table: '*', access: [read, write]}\n"
        "  reader:\n    - {warehouse: demo, namespace: 'team_a_*', table: '*', access: [read]}\n"
    )
    env = stack_env(info) | {
        "LAKEGATE__CALLERS__MODE": "token",
        "LAKEGATE__CALLERS__TOKENS_FILE": str(run / "tokens.json"),
        "LAKEGATE__CALLERS__POLICY_FILE": str(run / "policy.yaml"),
        "LAKEGATE__LOG__LEVEL": "DEBUG",
    }
    proc = start_gateway(run, env, name="callers")
    try:
        # `served`: secrets the gateway answered during the run, scanned for in its log.
        yield {"proc": proc, "a": ns_a, "b": ns_b, "info": info, "served": []}
    finally:
        code = proc.stop()
        assert code == 0


def _http(proc: GatewayProcess, token: str | None = ALICE) -> httpx.Client:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    return httpx.Client(base_url=proc.http_url, trust_env=False, timeout=30, headers=headers)


def test_native_http_allows_a_and_refuses_b(setup: dict) -> None:
    with _http(setup["proc"]) as c:
        ok = c.get(f"/v1/warehouses/demo/namespaces/{setup['a']}/tables/tbl/credentials")
        assert ok.status_code == 200, ok.text
        cfg = ok.json()["credentials"][0]["config"]
        setup["served"].extend([cfg["s3.secret-access-key"], cfg["s3.session-token"]])
        denied = c.get(f"/v1/warehouses/demo/namespaces/{setup['b']}/tables/tbl/credentials")
        assert denied.status_code == 403
        assert denied.json()["error"]["type"] == "PermissionDenied"
        # alice's write grant on A does not extend to B, nor to invalidating everything
        assert c.post("/v1/cache/invalidate", json={"all": True}).status_code == 403


def test_requests_without_auth_or_with_a_bad_token_are_refused(setup: dict) -> None:
    path = f"/v1/warehouses/demo/namespaces/{setup['a']}/tables/tbl/credentials"
    with _http(setup["proc"], token=None) as c:
        assert c.get(path).status_code == 403  # neither Authorization nor marker: forgeable
        assert c.get(path, headers={"X-Lakegate-Request": "1"}).status_code == 401
        assert c.get(path, headers={"Authorization": "Bearer wrong"}).status_code == 401
        forged = c.get(path, headers={"Authorization": f"Bearer {ALICE}",
                                      "Origin": "http://evil.example"})
        assert forged.status_code == 403
        assert forged.json()["error"]["type"] == "ForgeableRequest"


def test_grpc_refuses_b(setup: dict) -> None:
    proc: GatewayProcess = setup["proc"]
    with grpc.insecure_channel(f"unix:{proc.grpc_uds}") as channel:
        stub = credentials_pb2_grpc.CredentialServiceStub(channel)
        md = (("authorization", f"Bearer {ALICE}"),)

        def ask(ns: str, metadata=md) -> credentials_pb2.GetTableCredentialsResponse:
            return stub.GetTableCredentials(credentials_pb2.GetTableCredentialsRequest(
                table=common_pb2.TableRef(warehouse="demo", namespace=[ns], name="tbl")),
                metadata=metadata, timeout=30)

        assert ask(setup["a"]).warehouse_id == setup["info"].warehouse.id
        with pytest.raises(grpc.RpcError) as info:
            ask(setup["b"])
        assert info.value.code() == grpc.StatusCode.PERMISSION_DENIED
        with pytest.raises(grpc.RpcError) as info:
            ask(setup["a"], metadata=())
        assert info.value.code() == grpc.StatusCode.UNAUTHENTICATED


def test_lakekeeper_surface_refuses_b_for_pylakekeeper(setup: dict) -> None:
    proc: GatewayProcess = setup["proc"]
    with Client(base_url=proc.http_url, warehouse="demo", auth=StaticToken(ALICE)) as lk:
        assert lk.generic_tables.load(setup["a"], "tbl", vended=True).credentials
        with pytest.raises(LakekeeperHTTPError) as info:
            lk.generic_tables.load(setup["b"], "tbl", vended=True)
        # Lakekeeper answers a table the caller may not see with 404, never 403.
        assert info.value.status_code == 404
        assert "NoSuchGenericTableException" in str(info.value)
        assert lk.whoami()["id"] == "oidc~alice"
    with Client(base_url=proc.http_url, warehouse="demo", auth=StaticToken("nope")) as lk:
        with pytest.raises(LakekeeperHTTPError) as info:
            lk.generic_tables.load(setup["a"], "tbl")
        assert info.value.status_code == 401


def test_aws_surface_refuses_b(setup: dict) -> None:
    with _http(setup["proc"], token=None) as c:
        auth = {"Authorization": ALICE}  # botocore sends the raw token
        ok = c.get(f"/v1/aws-credentials/demo/{setup['a']}/tbl", headers=auth)
        assert ok.status_code == 200
        setup["served"].extend([ok.json()["SecretAccessKey"], ok.json()["Token"]])
        assert c.get(f"/v1/aws-credentials/demo/{setup['b']}/tbl", headers=auth).status_code == 403


def test_admin_may_use_b_and_invalidate_everything(setup: dict) -> None:
    with _http(setup["proc"], token=ADMIN) as c:
        assert c.get(
            f"/v1/warehouses/demo/namespaces/{setup['b']}/tables/tbl/credentials"
        ).status_code == 200
        assert c.post("/v1/cache/invalidate", json={"all": True}).status_code == 200


def test_a_caller_limited_to_read_gets_keys_that_storage_refuses_for_writes(setup: dict) -> None:
    """Fail closed on access level: the reader's credential comes from the catalog's read role,
    so real storage (SeaweedFS STS) lets it read the table's prefix and refuses PutObject."""
    path = f"/v1/warehouses/demo/namespaces/{setup['a']}/tables/tbl/credentials"
    with _http(setup["proc"], token=READER) as c:
        assert c.get(path, params={"access": "write"}).status_code == 403
        resp = c.get(path, params={"access": "read"})
    assert resp.status_code == 200, resp.text
    doc = resp.json()
    config = doc["credentials"][0]["config"]
    setup["served"].extend([config["s3.secret-access-key"], config["s3.session-token"]])
    bucket, _, prefix = doc["location"].split("://", 1)[1].partition("/")
    s3 = boto3.client(
        "s3", endpoint_url=config["s3.endpoint"], region_name=config.get("s3.region", "us-east-1"),
        aws_access_key_id=config["s3.access-key-id"],
        aws_secret_access_key=config["s3.secret-access-key"],
        aws_session_token=config["s3.session-token"],
    )
    s3.list_objects_v2(Bucket=bucket, Prefix=prefix.rstrip("/") + "/")  # reading is allowed
    with pytest.raises(ClientError) as refused:
        s3.put_object(Bucket=bucket, Key=prefix.rstrip("/") + "/reader-was-here.bin", Body=b"x")
    assert refused.value.response["Error"]["Code"] == "AccessDenied"


def test_zz_no_secret_in_the_gateway_log(setup: dict) -> None:
    """Runs last in this module (name order): scan the whole DEBUG log of the run."""
    proc: GatewayProcess = setup["proc"]
    info = setup["info"]
    log = proc.log_text()
    assert "lakegate listening" in log
    planted = [ALICE, ADMIN, READER, info.idp.clients["gateway"].secret,
               info.s3.admin_secret_key, *setup["served"]]
    assert len(setup["served"]) >= 4
    for secret in planted:
        assert secret not in log
    devstack_log = Path(info.run_dir) / "logs" / "gateway.log"
    if devstack_log.exists():
        text = devstack_log.read_text(errors="replace")
        for secret in (info.idp.clients["gateway"].secret, *setup["served"]):
            assert secret not in text
