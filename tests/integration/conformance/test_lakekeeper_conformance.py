"""Each Lakekeeper behaviour of issue 16, checked against BOTH the emulator and the gateway.

Expected values come from Lakekeeper `main` v0.13.1-78-g90892e9cc (docs/lakekeeper-fidelity.md),
never from what either target happens to answer.
"""

from __future__ import annotations

import uuid

import httpx
import pytest
from botocore.exceptions import ClientError

from devstack.bootstrap import fetch_token
from tests.integration.conformance.conftest import Target
from tests.integration.s3_clients import vended_s3

pytestmark = pytest.mark.integration

DELEGATION = "X-Iceberg-Access-Delegation"
REGION_KEYS = ("s3.region", "region", "client.region", "s3.endpoint", "s3.path-style-access")


def _uid() -> str:
    return uuid.uuid4().hex[:8]


def _error_type(resp) -> str:
    return str(resp.json()["error"]["type"])


# ------------------------------------------------------------------ 1. access delegation
@pytest.mark.parametrize(
    "lines",
    [[], ["vended-credentials"], ["Vended-Credentials"], ["bogus"], ["remote-signing"],
     ["client-managed", "vended-credentials"]],
    ids=["none", "vended", "other-case", "unknown", "remote-signing", "two-lines"],
)
def test_load_vends_unless_client_managed_only(target: Target, lines):
    name, _ = target.new_table("dl")
    resp = target.http.get(f"{target.tables()}/{name}", headers=[(DELEGATION, v) for v in lines])
    assert resp.status_code == 200, resp.text
    if target.name == "gateway" and lines == ["remote-signing"]:
        # A caller asking for remote-signing never gets a key from the gateway; it signs
        # Iceberg tables only (docs/lakekeeper-fidelity.md item 12; the emulator vends here).
        assert "storage-credentials" not in resp.json()
        assert not [k for k in resp.json()["config"] if "key" in k or "token" in k]
        return
    creds = resp.json()["storage-credentials"]
    assert creds[0]["config"]["s3.session-token"]
    assert "s3.remote-signing-enabled" not in resp.json()["config"]


def test_client_managed_load_has_region_keys_and_no_credentials(target: Target):
    name, _ = target.new_table("cm")
    body = target.http.get(
        f"{target.tables()}/{name}", headers={DELEGATION: "bogus, client-managed"}
    ).json()
    assert "storage-credentials" not in body
    for key in REGION_KEYS:
        assert body["config"][key], key
    assert not [k for k in body["config"] if "key" in k or "token" in k]


# ------------------------------------------------------------------ 2. session policy
def test_credential_cannot_list_a_sibling_whose_name_extends_its_own(target: Target):
    _, first = target.new_table("pol")
    base = first["table"]["base-location"].rpartition("/")[0] + f"/sib_{_uid()}"
    bucket = base.removeprefix("s3://").partition("/")[0]
    keys, names = {}, {}
    for leaf in ("t1", "t10"):
        names[leaf] = f"sib_{leaf}_{_uid()}"
        resp = target.create(names[leaf], **{"base-location": f"{base}/{leaf}"})
        assert resp.status_code == 200, resp.text
        keys[leaf] = resp.json()["table"]["base-location"].removeprefix(f"s3://{bucket}/")

    def vend(name: str) -> dict[str, str]:
        resp = target.http.get(f"{target.tables()}/{name}/credentials")
        assert resp.status_code == 200, resp.text
        return resp.json()["storage-credentials"][0]["config"]

    vended_s3(vend(names["t10"])).put_object(Bucket=bucket, Key=f"{keys['t10']}/f", Body=b"x")
    t1 = vended_s3(vend(names["t1"]))
    t1.put_object(Bucket=bucket, Key=f"{keys['t1']}/g", Body=b"y")
    listed = t1.list_objects_v2(Bucket=bucket, Prefix=f"{keys['t1']}/")
    assert [o["Key"] for o in listed["Contents"]] == [f"{keys['t1']}/g"]
    for prefix in (f"{keys['t10']}/", keys["t1"]):
        with pytest.raises(ClientError) as info:
            t1.list_objects_v2(Bucket=bucket, Prefix=prefix)
        assert info.value.response["Error"]["Code"] == "AccessDenied"


# ------------------------------------------------------------------ 3. storage layout
def test_default_layout_is_flat_uuidv7_and_location_is_checked_before_the_name(target: Target):
    _, created = target.new_table("lay")
    base, _, leaf = created["table"]["base-location"].rpartition("/")
    assert uuid.UUID(leaf).version == 7
    name = f"dup_{_uid()}"
    spot = f"{base}/spot_{_uid()}"
    assert target.create(name, **{"base-location": spot}).status_code == 200
    again = target.create(name, **{"base-location": spot})
    assert again.status_code == 409
    assert _error_type(again) == "LocationAlreadyTaken"


def test_namespace_location_is_the_base(target: Target):
    _, created = target.new_table("nsl")
    base = created["table"]["base-location"].rpartition("/")[0]
    ns = target.http.get(f"/catalog/v1/{target.wh}/namespaces/{target.ns}")
    assert ns.status_code == 200, ns.text
    assert ns.json()["properties"]["location"] == base


# ------------------------------------------------------------------ 4. errors and visibility
def test_missing_table_is_404_no_such_generic_table(target: Target):
    resp = target.http.get(f"{target.tables()}/missing_{_uid()}")
    assert resp.status_code == 404
    assert _error_type(resp) == "NoSuchGenericTableException"


def test_cache_control_and_vary(target: Target):
    name, _ = target.new_table("hdr")
    loaded = target.http.get(f"{target.tables()}/{name}")
    assert "storage-credentials" in loaded.json()
    missing = target.http.get(f"{target.tables()}/missing_{_uid()}")
    # Lakekeeper says `private` on every answer; the gateway `no-store` on one carrying keys
    # (issue 50: a private cache must not keep them either).
    keys = "no-store" if target.name == "gateway" else "private"
    for resp, expected in ((loaded, keys), (missing, "private")):
        assert resp.headers["Cache-Control"] == expected
        vary = {v.strip() for v in resp.headers["Vary"].lower().split(",")}
        assert {"authorization", "x-project-id", "x-iceberg-access-delegation"} <= vary


# ------------------------------------------------------------------ 5. paging
def test_page_size_is_clamped_and_a_null_token_is_omitted(target: Target):
    ns = target.new_namespace("pg")
    for i in range(3):
        assert target.create(f"p{i}_{_uid()}", ns=ns).status_code == 200
    for size in ("0", "-3", "5000"):
        resp = target.http.get(target.tables(ns), params={"pageSize": size})
        assert resp.status_code == 200, (size, resp.text)
    seen, token = [], None
    for _ in range(10):
        params = {"pageSize": "2", **({"pageToken": token} if token else {})}
        doc = target.http.get(target.tables(ns), params=params).json()
        seen += [i["name"] for i in doc["identifiers"]]
        assert doc.get("next-page-token", "absent") is not None
        token = doc.get("next-page-token")
        if token is None:
            break
    assert len(seen) == 3


def test_namespace_list_pages_by_1000_and_a_bad_token_is_400(target: Target):
    top = target.new_namespace("nsp")
    for i in range(3):
        resp = target.http.post(f"/catalog/v1/{target.wh}/namespaces",
                                json={"namespace": [top, f"c{i}"]})
        assert resp.status_code == 200, resp.text
    url = f"/catalog/v1/{target.wh}/namespaces"
    whole = target.http.get(url, params={"parent": top}).json()
    assert len(whole["namespaces"]) == 3
    assert "next-page-token" not in whole
    bad = target.http.get(url, params={"pageToken": "garbage!!"})
    assert bad.status_code == 400
    assert _error_type(bad) == "InvalidPaginationToken"


# ------------------------------------------------------------------ 6. rename
def _rename(target: Target, src: tuple[str, str], dst: tuple[str, str]):
    return target.http.post(
        f"/lakekeeper/v1/{target.wh}/generic-tables/rename",
        json={"source": {"namespace": [src[0]], "name": src[1]},
              "destination": {"namespace": [dst[0]], "name": dst[1]}},
    )


def test_rename_semantics(target: Target):
    ghost = (target.ns, f"ghost_{_uid()}")
    resp = _rename(target, ghost, ghost)
    assert resp.status_code == 404
    assert _error_type(resp) == "NoSuchGenericTableException"
    a, _ = target.new_table("ra")
    b, _ = target.new_table("rb")
    taken = _rename(target, (target.ns, a), (target.ns, b))
    assert taken.status_code == 409
    missing_ns = _rename(target, (f"nons_{_uid()}", a), (target.ns, f"x_{_uid()}"))
    assert missing_ns.status_code == 404
    assert _error_type(missing_ns) == "NoSuchNamespaceException"
    assert _rename(target, (target.ns, a), (target.ns, a)).status_code == 204


# ------------------------------------------------------------------ 7. idempotency
def test_idempotency_replay_reuse_and_validation(target: Target):
    key = str(uuid.uuid4())
    name = f"idem_{_uid()}"
    first = target.http.post(target.tables(), json={"name": name, "format": "lance"},
                             headers={"Idempotency-Key": key})
    again = target.http.post(target.tables(), json={"name": name, "format": "lance"},
                             headers={"Idempotency-Key": key})
    assert (first.status_code, again.status_code) == (200, 200), again.text
    assert again.json()["table"]["base-location"] == first.json()["table"]["base-location"]
    reused = target.http.delete(f"{target.tables()}/{name}", headers={"Idempotency-Key": key})
    assert reused.status_code == 400
    assert _error_type(reused) == "IdempotencyKeyReused"
    bad = target.http.get(target.tables(), headers={"Idempotency-Key": "not-a-uuid"})
    assert bad.status_code == 400
    assert _error_type(bad) == "InvalidIdempotencyKey"


# ------------------------------------------------------------------ 8. query booleans
@pytest.mark.parametrize("value", ["1", "t", "T", "TRUE", "true", "True"])
def test_lakekeeper_true_spellings_are_accepted(target: Target, value):
    name, _ = target.new_table("bt")
    # no purge: a delayed purge would land in other modules' emulator counters
    resp = target.http.delete(f"{target.tables()}/{name}",
                              params={"force": value, "purgeRequested": "false"})
    assert resp.status_code == 204, resp.text


@pytest.mark.parametrize("value", ["f", "F", "FALSE", "0"])
def test_lakekeeper_false_spellings_are_accepted(target: Target, value):
    name, _ = target.new_table("bf")
    resp = target.http.delete(f"{target.tables()}/{name}", params={"purgeRequested": value})
    assert resp.status_code == 204, resp.text


@pytest.mark.parametrize("value", ["yes", "no", "tRUE", ""])
def test_other_booleans_are_400(target: Target, value):
    name, _ = target.new_table("bx")
    resp = target.http.delete(f"{target.tables()}/{name}", params={"force": value})
    assert resp.status_code == 400
    assert target.http.get(f"{target.tables()}/{name}").status_code == 200


# ------------------------------------------------------------------ 9. HEAD
def test_head_answers_wherever_get_does(target: Target):
    name, _ = target.new_table("hd")
    for path in (target.tables(), f"{target.tables()}/{name}",
                 f"{target.tables()}/{name}/credentials",
                 f"/catalog/v1/{target.wh}/namespaces", "/management/v1/whoami"):
        resp = target.http.head(path)
        assert resp.status_code == 200, path
        assert resp.content == b""
    assert target.http.head(f"{target.tables()}/missing_{_uid()}").status_code == 404


# ------------------------------------------------------------------ 10. request metadata
@pytest.mark.parametrize("given", ["abc-123", "not a uuid, with spaces"])
def test_any_request_id_is_echoed(target: Target, given):
    resp = target.http.get(target.tables(), headers={"x-request-id": given})
    assert resp.headers["x-request-id"] == given


def test_list_echoes_the_request_paths_namespace_case(target: Target):
    ns = target.new_namespace("Case")
    assert target.create(f"t_{_uid()}", ns=ns).status_code == 200
    listed = target.http.get(target.tables(ns.upper())).json()["identifiers"]
    assert [i["namespace"] for i in listed] == [[ns.upper()]]


@pytest.mark.parametrize("length", [255, 300])
def test_a_created_name_can_be_loaded(target: Target, length):
    name = ("n" + _uid() * 40)[:length]
    created = target.create(name)
    loaded = target.http.get(f"{target.tables()}/{name}")
    if created.status_code == 200:
        assert loaded.status_code == 200, loaded.text
    else:
        assert created.status_code == 400
        assert loaded.status_code in (400, 404)


def test_whoami_id_has_lakekeepers_form(target: Target):
    doc = target.http.get("/management/v1/whoami").json()
    assert doc["id"].startswith("oidc~")
    assert len(doc["id"]) > len("oidc~")


# ------------------------------------------------------------------ 11. refresh endpoint key
def test_iceberg_refresh_endpoint_names_the_server_the_client_called(target: Target):
    # The Iceberg table is created on the catalog itself; its credentials are then read
    # through the target, whose own address the refresh URL must carry.
    c = target.info.idp.clients["direct"]
    token = fetch_token(target.info.idp.token_url, c.id, c.secret)
    name = f"ice_{_uid()}"
    schema = {"type": "struct", "schema-id": 0,
              "fields": [{"id": 1, "name": "x", "required": False, "type": "long"}]}
    created = httpx.post(
        f"{target.info.catalog.url}/catalog/v1/{target.wh}/namespaces/{target.ns}/tables",
        json={"name": name, "schema": schema},
        headers={"Authorization": f"Bearer {token}"}, timeout=30, trust_env=False)
    assert created.status_code == 200, created.text
    resp = target.http.get(
        f"/catalog/v1/{target.wh}/namespaces/{target.ns}/tables/{name}/credentials")
    assert resp.status_code == 200, resp.text
    creds = resp.json()["storage-credentials"]
    assert creds
    base = str(target.http.base_url).rstrip("/")
    for cred in creds:
        endpoint = cred["config"]["client.refresh-credentials-endpoint"]
        assert endpoint.startswith(f"{base}/catalog/v1/{target.wh}/namespaces/"), endpoint
        assert endpoint.endswith(f"/tables/{name}/credentials")
