"""Lakekeeper semantics of the emulator: namespaces, names, pagination, protection, soft delete,
undrop, idempotency, purge."""

from __future__ import annotations

import time
import uuid

import boto3
import botocore.config
import pytest

pytestmark = pytest.mark.integration


def _uid() -> str:
    return uuid.uuid4().hex[:8]


def _create_with_key(catalog, name: str, key: str):
    """Create a lance table with an `Idempotency-Key`."""
    return catalog.http.post(
        catalog.tables_path(),
        json={"name": name, "format": "lance"},
        headers={"Idempotency-Key": key},
    )


def _ns(catalog, *parts: str, wh: str | None = None):
    return catalog.http.post(
        f"/catalog/v1/{wh or catalog.wh}/namespaces", json={"namespace": list(parts)}
    )


def test_multi_level_namespaces_use_unit_separator(catalog):
    top = f"team_{_uid()}"
    assert _ns(catalog, top).status_code == 200
    assert _ns(catalog, top, "Sub").status_code == 200
    assert _ns(catalog, top, "sub").status_code == 409  # case-insensitive duplicate
    assert _ns(catalog, f"orphan_{_uid()}", "child").status_code == 404
    got = catalog.http.get(f"/catalog/v1/{catalog.wh}/namespaces/{top}%1FSUB")
    assert got.json()["namespace"] == [top, "Sub"]  # case preserved
    assert catalog.http.head(f"/catalog/v1/{catalog.wh}/namespaces/{top}%1Fsub").status_code == 204
    assert catalog.http.head(f"/catalog/v1/{catalog.wh}/namespaces/{top}%1Fx").status_code == 404
    listed = catalog.http.get(f"/catalog/v1/{catalog.wh}/namespaces", params={"parent": top})
    assert listed.json()["namespaces"] == [[top, "Sub"]]
    assert catalog.create("t", ns=f"{top}%1Fsub").status_code == 200
    drop = catalog.http.delete(f"/catalog/v1/{catalog.wh}/namespaces/{top}")
    assert drop.status_code == 409
    drop = catalog.http.delete(
        f"/catalog/v1/{catalog.wh}/namespaces/{top}", params={"recursive": "true"}
    )
    assert drop.status_code == 204
    assert catalog.http.head(f"/catalog/v1/{catalog.wh}/namespaces/{top}%1Fsub").status_code == 404


def test_reserved_namespace_is_refused(catalog):
    assert _ns(catalog, "system").json()["error"]["type"] == "ReservedNamespace"


def test_config_resolves_the_warehouse_name_to_the_prefix(catalog):
    body = catalog.http.get("/catalog/v1/config", params={"warehouse": "DEMO"}).json()
    assert body["defaults"]["prefix"] == catalog.wh
    assert body["overrides"]["uri"].endswith("/catalog")


def test_names_are_case_insensitive_and_case_preserving(catalog):
    name = f"MiXed_{_uid()}"
    assert catalog.create(name).status_code == 200
    loaded = catalog.http.get(f"{catalog.tables_path()}/{name.lower()}")
    assert loaded.json()["table"]["name"] == name
    clash = catalog.create(name.upper())
    assert clash.status_code == 409
    assert clash.json()["error"]["type"] == "GenericTableAlreadyExists"


def test_list_pages_carry_a_token_until_an_empty_page(catalog):
    ns = f"pages_{_uid()}"
    _ns(catalog, ns)
    for i in range(3):
        catalog.create(f"t{i}", ns=ns)
    pages, token = [], None
    for _ in range(10):
        params = {"pageSize": "2", **({"pageToken": token} if token else {})}
        body = catalog.http.get(catalog.tables_path(ns), params=params).json()
        pages.append([i["name"] for i in body["identifiers"]])
        token = body.get("next-page-token")
        if token is None:
            break
    assert pages == [["t0", "t1"], ["t2"], []]


def test_location_overlap_is_409(catalog):
    first = catalog.create(f"loc_{_uid()}").json()["table"]["base-location"]
    resp = catalog.create(f"loc_{_uid()}", **{"base-location": first + "/nested"})
    assert resp.status_code == 409
    assert resp.json()["error"]["type"] == "LocationAlreadyTaken"


def test_rename_across_namespaces_and_into_a_taken_name(catalog):
    other = f"dest_{_uid()}"
    _ns(catalog, other)
    a, b = f"a_{_uid()}", f"b_{_uid()}"
    catalog.create(a)
    catalog.create(b)
    url = f"/lakekeeper/v1/{catalog.wh}/generic-tables/rename"

    def rename(src, dst_ns, dst):
        return catalog.http.post(
            url,
            json={
                "source": {"namespace": [catalog.ns], "name": src},
                "destination": {"namespace": [dst_ns], "name": dst},
            },
        )

    assert rename(a, catalog.ns, b.upper()).status_code == 409
    assert rename(a, catalog.ns, a).status_code == 204
    assert rename("missing", catalog.ns, "x").status_code == 404
    assert rename(a, other, a).status_code == 204
    assert catalog.http.get(f"{catalog.tables_path(other)}/{a}").status_code == 200


def test_idempotency_key_replays_the_first_result(catalog, hooks):
    key = str(uuid.uuid4())
    name = f"idem_{_uid()}"
    first = _create_with_key(catalog, name, key)
    again = _create_with_key(catalog, name, key)
    assert (first.status_code, again.status_code) == (200, 200)
    # Lakekeeper answers a replayed create by loading the table client-managed: the same table,
    # plus the region/endpoint `config`, and no credentials.
    assert again.json()["table"] == first.json()["table"]
    assert again.json()["config"]["s3.region"]
    assert "storage-credentials" not in again.json()
    assert "s3.access-key-id" not in again.json()["config"]
    assert catalog.create(name).status_code == 409


def test_idempotency_key_is_scoped_and_validated_on_every_request(catalog):
    key = str(uuid.uuid4())
    name = f"idem_{_uid()}"
    created = _create_with_key(catalog, name, key)
    assert created.status_code == 200
    reused = catalog.http.delete(
        f"{catalog.tables_path()}/{name}", headers={"Idempotency-Key": key}
    )
    assert reused.status_code == 400
    assert reused.json()["error"]["type"] == "IdempotencyKeyReused"
    bad_get = catalog.http.get(catalog.tables_path(), headers={"Idempotency-Key": "nope"})
    assert bad_get.status_code == 400
    assert bad_get.json()["error"]["type"] == "InvalidIdempotencyKey"


def test_default_layout_is_flat_and_location_is_checked_before_the_name(catalog):
    first = catalog.create(f"flat_{_uid()}").json()["table"]["base-location"]
    base, _, leaf = first.rpartition("/")
    assert uuid.UUID(leaf).version == 7
    ns = catalog.http.get(f"/catalog/v1/{catalog.wh}/namespaces/{catalog.ns}").json()
    assert ns["properties"]["location"] == base
    name = f"dup_{_uid()}"
    spot = f"{base}/spot_{_uid()}"
    assert catalog.create(name, **{"base-location": spot}).status_code == 200
    again = catalog.create(name, **{"base-location": spot})
    assert again.status_code == 409
    assert again.json()["error"]["type"] == "LocationAlreadyTaken"
    assert catalog.create(name).json()["error"]["type"] == "GenericTableAlreadyExists"


def test_rename_of_a_missing_table_onto_itself_is_404(catalog):
    missing = {"namespace": [catalog.ns], "name": f"ghost_{_uid()}"}
    resp = catalog.http.post(
        f"/lakekeeper/v1/{catalog.wh}/generic-tables/rename",
        json={"source": missing, "destination": missing},
    )
    assert resp.status_code == 404
    assert resp.json()["error"]["type"] == "NoSuchGenericTableException"


@pytest.mark.parametrize("value", ["1", "t", "T", "TRUE", "true", "True"])
def test_query_booleans_accept_exactly_lakekeepers_true_spellings(catalog, value):
    name = f"bool_{_uid()}"
    catalog.create(name)
    resp = catalog.http.delete(
        f"{catalog.tables_path()}/{name}", params={"force": value, "purgeRequested": "false"}
    )
    assert resp.status_code == 204


@pytest.mark.parametrize("value", ["yes", "no", "y", "tRUE", " true", ""])
def test_other_query_booleans_are_400(catalog, value):
    name = f"bool_{_uid()}"
    catalog.create(name)
    resp = catalog.http.delete(f"{catalog.tables_path()}/{name}", params={"force": value})
    assert resp.status_code == 400
    assert catalog.http.get(f"{catalog.tables_path()}/{name}").status_code == 200


def test_head_answers_wherever_get_does(catalog):
    name = f"head_{_uid()}"
    catalog.create(name)
    for path in (
        catalog.tables_path(),
        f"{catalog.tables_path()}/{name}",
        f"{catalog.tables_path()}/{name}/credentials",
        f"/catalog/v1/{catalog.wh}/namespaces",
        "/management/v1/whoami",
    ):
        resp = catalog.http.head(path)
        assert resp.status_code == 200, path
        assert resp.content == b""
    assert catalog.http.head(f"{catalog.tables_path()}/missing_{_uid()}").status_code == 404


def test_namespace_list_pages_by_1000_without_a_token(catalog):
    top = f"pg_{_uid()}"
    assert _ns(catalog, top).status_code == 200
    for i in range(3):
        assert _ns(catalog, top, f"c{i}").status_code == 200
    url = f"/catalog/v1/{catalog.wh}/namespaces"
    whole = catalog.http.get(url, params={"parent": top}).json()
    assert len(whole["namespaces"]) == 3
    assert "next-page-token" not in whole
    page = catalog.http.get(url, params={"parent": top, "pageSize": 2}).json()
    assert len(page["namespaces"]) == 2
    assert page["next-page-token"]
    rest = catalog.http.get(
        url, params={"parent": top, "pageSize": 2, "pageToken": page["next-page-token"]}
    ).json()
    assert len(rest["namespaces"]) == 1
    assert "next-page-token" not in rest
    for size in ("0", "-5", "100000"):
        assert catalog.http.get(url, params={"parent": top, "pageSize": size}).status_code == 200
    bad = catalog.http.get(url, params={"pageToken": "garbage!!"})
    assert bad.status_code == 400
    assert bad.json()["error"]["type"] == "InvalidPaginationToken"


def test_list_echoes_the_request_paths_namespace_case(catalog):
    top = f"Case_{_uid()}"
    assert _ns(catalog, top).status_code == 200
    catalog.create(f"t_{_uid()}", ns=top)
    listed = catalog.http.get(catalog.tables_path(top.upper())).json()["identifiers"]
    assert [i["namespace"] for i in listed] == [[top.upper()]]


def _admin_warehouse(catalog, delete_profile: dict) -> str:
    s3 = catalog.stack.info.s3
    body = {
        "warehouse-name": f"wh_{_uid()}",
        "storage-profile": {
            "type": "s3",
            "bucket": s3.bucket,
            "region": s3.region,
            "endpoint": s3.endpoint,
            "path-style-access": True,
            "key-prefix": "lakehouse",
            "sts-enabled": False,
        },
        "storage-credential": {
            "type": "s3",
            "credential-type": "access-key",
            "access-key-id": "unused",
            "secret-access-key": "unused",
        },
        "delete-profile": delete_profile,
    }
    resp = catalog.http.post("/management/v1/warehouse", json=body)
    assert resp.status_code == 201, resp.text
    wid = resp.json()["warehouse-id"]
    assert _ns(catalog, "ns", wh=wid).status_code == 200
    return str(wid)


def test_soft_delete_lists_deleted_and_undrop_restores_the_same_id(catalog):
    wid = _admin_warehouse(catalog, {"type": "soft", "expiration-seconds": 3600})
    base = f"/lakekeeper/v1/{wid}/namespaces/ns/generic-tables"
    catalog.http.post(base, json={"name": "keep", "format": "delta"})
    table_id = catalog.http.get(base).json()["identifiers"][0]["id"]
    assert catalog.http.delete(f"{base}/keep").status_code == 204
    assert catalog.http.get(f"{base}/keep").status_code == 404
    deleted = catalog.http.get(f"/management/v1/warehouse/{wid}/deleted-tabulars").json()
    (tab,) = deleted["tabulars"]
    assert (tab["id"], tab["typ"], tab["namespace"]) == (table_id, "generic-table", ["ns"])
    undrop = catalog.http.post(
        f"/management/v1/warehouse/{wid}/deleted-tabulars/undrop",
        json={"targets": [{"type": "generic-table", "id": table_id}]},
    )
    assert undrop.status_code == 204
    assert catalog.http.get(base).json()["identifiers"][0]["id"] == table_id


def test_protected_table_needs_force_to_drop(catalog):
    wid = _admin_warehouse(catalog, {"type": "hard"})
    base = f"/lakekeeper/v1/{wid}/namespaces/ns/generic-tables"
    catalog.http.post(base, json={"name": "p", "format": "lance"})
    table_id = catalog.http.get(base).json()["identifiers"][0]["id"]
    prot = f"/management/v1/warehouse/{wid}/generic-table/{table_id}/protection"
    assert catalog.http.get(prot).json()["protected"] is False
    set_resp = catalog.http.post(prot, json={"protected": True}).json()
    assert set_resp["protected"] is True
    assert set_resp["updated_at"].endswith("Z")
    assert catalog.http.get(f"{base}/p").json()["table"]["protected"] is True
    refused = catalog.http.delete(f"{base}/p")
    assert refused.json()["error"]["type"] == "ProtectedTabularDeletionWithoutForce"
    assert catalog.http.delete(f"{base}/p", params={"force": "true"}).status_code == 204


def _writer(catalog, name: str):
    cred = catalog.http.get(f"{catalog.tables_path()}/{name}/credentials").json()
    config = cred["storage-credentials"][0]["config"]
    bucket, _, key = cred["storage-credentials"][0]["prefix"].removeprefix("s3://").partition("/")
    s3 = boto3.session.Session().client(
        "s3",
        endpoint_url=config["s3.endpoint"],
        region_name="us-east-1",
        aws_access_key_id=config["s3.access-key-id"],
        aws_secret_access_key=config["s3.secret-access-key"],
        aws_session_token=config["s3.session-token"],
        config=botocore.config.Config(s3={"addressing_style": "path"}),
    )
    s3.put_object(Bucket=bucket, Key=f"{key}/a", Body=b"1")
    return s3, bucket, key


def test_drop_purges_files_by_default_but_not_with_purge_false(catalog, hooks):
    purged, kept = f"purge_{_uid()}", f"keep_{_uid()}"
    catalog.create(purged)
    catalog.create(kept)
    s3, bucket, purged_key = _writer(catalog, purged)
    s3_kept, _, kept_key = _writer(catalog, kept)
    assert (
        catalog.http.delete(
            f"{catalog.tables_path()}/{kept}", params={"purgeRequested": "false"}
        ).status_code
        == 204
    )
    assert catalog.http.delete(f"{catalog.tables_path()}/{purged}").status_code == 204
    for _ in range(100):  # the stack's purge delay is 2 s
        # other tests' purges (of empty tables) may land here too: wait for our object
        if hooks.stats().get("purged_objects", 0) >= 1:
            break
        time.sleep(0.1)
    assert hooks.stats()["purged_objects"] == 1
    assert s3.list_objects_v2(Bucket=bucket, Prefix=f"{purged_key}/")["KeyCount"] == 0
    assert s3_kept.list_objects_v2(Bucket=bucket, Prefix=f"{kept_key}/")["KeyCount"] == 1


def test_dropping_a_namespace_with_tables_is_namespace_not_empty(catalog):
    top = f"ne_{_uid()}"
    assert _ns(catalog, top).status_code == 200
    assert catalog.create(f"t_{_uid()}", ns=top).status_code == 200
    resp = catalog.http.delete(f"/catalog/v1/{catalog.wh}/namespaces/{top}")
    assert resp.status_code == 409
    assert resp.json()["error"]["type"] == "NamespaceNotEmptyException"
