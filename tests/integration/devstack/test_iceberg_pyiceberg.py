"""pyiceberg's RestCatalog against the emulator directly: the emulator is an Iceberg catalog.

Real IdP token, real SeaweedFS STS credentials vended in `storage-credentials`, metadata files
really in S3, pyiceberg's own commit requirements (a stale commit gets 409).
"""

from __future__ import annotations

import uuid
from typing import Any

import pyarrow as pa
import pytest
from pyiceberg.catalog.rest import RestCatalog
from pyiceberg.exceptions import NoSuchTableError

from tests.integration.devstack.conftest import Catalog
from tests.integration.s3_clients import admin_s3

pytestmark = pytest.mark.integration

ROWS = pa.table({"id": pa.array([1, 2, 3], pa.int64()), "name": pa.array(["a", "b", "c"])})


def _rest(catalog: Catalog, **extra: str) -> RestCatalog:
    return RestCatalog(
        "emulator",
        uri=catalog.stack.info.catalog.url + "/catalog",
        warehouse=catalog.stack.info.warehouse.name,
        token=catalog.token,
        **{"header.X-Iceberg-Access-Delegation": "vended-credentials", **extra},
    )


def test_config_advertises_the_table_endpoints(catalog: Catalog) -> None:
    resp = catalog.http.get(
        "/catalog/v1/config", params={"warehouse": catalog.stack.info.warehouse.name}
    )
    endpoints = set(resp.json()["endpoints"])
    for ep in (
        "POST /v1/{prefix}/namespaces/{namespace}/tables",
        "GET /v1/{prefix}/namespaces/{namespace}/tables/{table}",
        "POST /v1/{prefix}/namespaces/{namespace}/tables/{table}",
        "DELETE /v1/{prefix}/namespaces/{namespace}/tables/{table}",
        "POST /v1/{prefix}/tables/rename",
        "GET /v1/{prefix}/namespaces/{namespace}/tables/{table}/credentials",
    ):
        assert ep in endpoints


def test_create_append_scan_conflict_drop(catalog: Catalog, hooks: Any) -> None:
    rest = _rest(catalog)
    ident = (catalog.ns, f"ice_{uuid.uuid4().hex[:8]}")
    table = rest.create_table(ident, schema=ROWS.schema)
    assert hooks.stats()["create_table"] == 1
    # the metadata file is really in storage, named NNNNN-<uuid>.metadata.json
    bucket, _, key = table.metadata_location.removeprefix("s3://").partition("/")
    assert key.split("/")[-1].startswith("00000-")
    assert key.endswith(".metadata.json")
    assert admin_s3(catalog.stack.info).head_object(Bucket=bucket, Key=key)["ContentLength"] > 0

    table.append(ROWS)
    other = rest.load_table(ident)
    assert other.scan().to_arrow().num_rows == 3
    table.append(ROWS)
    assert rest.load_table(ident).scan().to_arrow().sort_by("id").num_rows == 6
    stats = hooks.stats()
    assert stats["commit_table"] == 2
    assert stats["load_table"] >= 2
    assert stats["load_table_vended"] == stats["load_table"]

    # `other` holds the metadata of the first append: a commit based on it is stale -> 409
    stale = other.metadata.current_snapshot_id
    path = f"/catalog/v1/{catalog.wh}/namespaces/{catalog.ns}/tables/{ident[1]}"
    req = {"type": "assert-ref-snapshot-id", "ref": "main", "snapshot-id": stale}
    update = {"action": "set-properties", "updates": {"k": "v"}}
    resp = catalog.http.post(path, json={"requirements": [req], "updates": [update]})
    assert resp.status_code == 409, resp.text
    assert resp.json()["error"]["type"] == "CommitFailedException"
    assert "k" not in rest.load_table(ident).properties
    # pyiceberg's append on the stale table gets that 409 and retries on a fresh load
    other.append(ROWS)
    assert rest.load_table(ident).scan().to_arrow().num_rows == 9
    assert hooks.stats()["commit_table"] == 5  # 2 appends, the raw 409, the append's 409 + retry

    creds = rest.load_credentials(ident, table.location())
    assert creds["s3.session-token"]
    assert creds["client.refresh-credentials-endpoint"].endswith(f"/tables/{ident[1]}/credentials")
    assert hooks.stats()["load_table_credentials"] == 1

    renamed = (catalog.ns, ident[1] + "_r")
    rest.rename_table(ident, renamed)
    assert rest.load_table(renamed).scan().to_arrow().num_rows == 9
    rest.drop_table(renamed)
    with pytest.raises(NoSuchTableError):
        rest.load_table(renamed)


def test_client_managed_load_vends_nothing(catalog: Catalog, hooks: Any) -> None:
    rest = _rest(catalog)
    ident = (catalog.ns, f"ice_{uuid.uuid4().hex[:8]}")
    rest.create_table(ident, schema=ROWS.schema)
    hooks.reset()
    path = f"/catalog/v1/{catalog.wh}/namespaces/{catalog.ns}/tables/{ident[1]}"
    body = catalog.http.get(path, headers={"X-Iceberg-Access-Delegation": "client-managed"}).json()
    assert "storage-credentials" not in body
    assert "s3.session-token" not in body["config"]
    assert body["metadata"]["location"] + "/metadata/" in body["metadata-location"]
    stats = hooks.stats()
    assert (stats["load_table"], stats["load_table_vended"]) == (1, 0)
    rest.drop_table(ident)


def test_namespace_with_an_iceberg_table_is_not_empty(catalog: Catalog) -> None:
    rest = _rest(catalog)
    ns = f"icens_{uuid.uuid4().hex[:8]}"
    rest.create_namespace(ns)
    rest.create_table((ns, "t"), schema=ROWS.schema)
    path = f"/catalog/v1/{catalog.wh}/namespaces/{ns}"
    resp = catalog.http.delete(path)
    assert resp.status_code == 409
    assert resp.json()["error"]["type"] == "NamespaceNotEmptyException"
    assert catalog.http.delete(path, params={"recursive": "true"}).status_code == 204
    rest.create_namespace(ns)  # same name again: the old table is gone with the old namespace
    assert rest.list_tables(ns) == []
    catalog.http.delete(path)
