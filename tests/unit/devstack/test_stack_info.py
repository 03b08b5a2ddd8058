"""devstack.stack_info: the typed stack.json."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pydantic import ValidationError

from devstack.stack_info import StackInfo

CLIENT_SECRET, ADMIN_SECRET = "planted-client-secret", "planted-admin-secret"
RAW = {
    "run_dir": "/run/stack",
    "idp": {
        "issuer": "http://127.0.0.1:1/oidc", "token_url": "http://127.0.0.1:1/oidc/token",
        "jwks_uri": "http://127.0.0.1:1/oidc/jwks", "audience": "lakekeeper", "token_ttl_s": 3600,
        "clients": {"gateway": {"id": "gateway", "secret": CLIENT_SECRET}},
    },
    "s3": {
        "endpoint": "http://127.0.0.1:2", "region": "us-east-1", "bucket": "b",
        "key_prefix": "tables", "admin_access_key": "admin",
        "admin_secret_key": ADMIN_SECRET, "role_arn": "arn:aws:iam::1:role/x",
        "metrics_url": "http://127.0.0.1:9",
    },
    "catalog": {"url": "http://127.0.0.1:3", "auth": True, "roles": {"read": "r", "write": "w"}},
    "warehouse": {"id": "0198-wh", "name": "demo", "sts_validity_s": 900,
                  "delete_profile": "soft"},
    "namespace": "demo_ns",
    "gateway": {"http_url": "http://127.0.0.1:4", "grpc_target": "127.0.0.1:5",
                "uds": "/run/stack/h.sock", "grpc_uds": "/run/stack/g.sock", "caller_token": None},
    "nats": {"url": "nats://127.0.0.1:6", "subject": "lakekeeper.events",
             "monitor_url": "http://127.0.0.1:7"},
    "azure": {"blob_endpoint": "http://127.0.0.1:8/devstoreaccount1",
              "account": "devstoreaccount1", "host": "dfs.core.windows.net",
              "container": "warehouse", "key_prefix": "lakehouse",
              "server_endpoint": "http://127.0.0.1:18/devstoreaccount1"},
    "gcs": None,
    "storage_warehouses": {"adls": {"id": "0198-wh-adls", "name": "demo_adls",
                                    "sts_validity_s": 900, "delete_profile": "hard"}},
    "pids": {"idp": 10, "s3": 11, "nats": 14, "catalog": 12, "gateway": 13},
    "startup_s": 1.5,
}


def test_stack_json_round_trips_key_for_key(tmp_path: Path) -> None:
    (tmp_path / "stack.json").write_text(json.dumps(RAW))
    info = StackInfo.load(tmp_path)  # a run directory or the file itself
    assert info == StackInfo.load(tmp_path / "stack.json")
    assert info.idp.clients["gateway"].secret == CLIENT_SECRET
    assert info.gateway_url == "http://127.0.0.1:4"
    assert info.warehouse_for("adls").name == "demo_adls"
    assert info.warehouse_for("s3").name == "demo"
    with pytest.raises(LookupError, match="gcs"):
        info.warehouse_for("gcs")
    info.write(tmp_path / "again.json")
    assert json.loads((tmp_path / "again.json").read_text()) == RAW
    assert (tmp_path / "again.json").stat().st_mode & 0o777 == 0o600


def test_repr_never_shows_a_secret() -> None:
    text = repr(StackInfo.model_validate(RAW))
    assert CLIENT_SECRET not in text
    assert ADMIN_SECRET not in text
    assert "demo_ns" in text


def test_a_missing_or_misspelt_key_is_named() -> None:
    broken = {**RAW, "warehouse": {k: v for k, v in RAW["warehouse"].items() if k != "id"}}
    with pytest.raises(ValidationError, match=r"warehouse\.id"):
        StackInfo.model_validate(broken)
    with pytest.raises(ValidationError, match="namespaces"):
        StackInfo.model_validate({**RAW, "namespaces": "x"})


def test_a_stack_without_gateway_says_so() -> None:
    info = StackInfo.model_validate({**RAW, "gateway": None})
    with pytest.raises(LookupError, match="without a gateway"):
        _ = info.gateway_url
