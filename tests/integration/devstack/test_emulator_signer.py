"""The emulator's S3 signer in process (no IdP, no store): Lakekeeper's routes, lookups and rules.

The signature itself is checked against botocore's own S3 SigV4 of the same request and time,
and against a real store in tests/integration/devstack/test_signing_stack.py.
"""

from __future__ import annotations

import datetime
import hashlib
import json
from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer
from botocore.auth import S3SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials
from pyiceberg.schema import Schema
from pyiceberg.types import LongType, NestedField

from devstack.emulator.app import create_app
from devstack.emulator.config import EmulatorConfig
from devstack.emulator.iceberg_meta import CreateIcebergTable, create_metadata, dump_metadata
from devstack.emulator.routes_iceberg import ICEBERG
from devstack.emulator.signer import select_delegation
from devstack.emulator.state import STATE

pytestmark = pytest.mark.integration

AK, SK = "AKIDEXAMPLE", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY"
EP = "http://127.0.0.1:8333"
NOW_S = 1_800_000_000.0
TID = "01900000-0000-7000-8000-000000000001"
READ_ROLE = "01900000-0000-7000-8000-0000000000aa"


@pytest.fixture
async def client() -> AsyncIterator[TestClient]:
    app = create_app(EmulatorConfig(purge_delay_s=None, read_role_id=READ_ROLE))
    app[STATE].vendor.wall_clock = lambda: NOW_S
    async with TestClient(TestServer(app)) as c:
        yield c


async def _warehouse(client: TestClient, **profile: Any) -> str:
    body = {
        "warehouse-name": f"w{len(profile)}{hash(json.dumps(profile, sort_keys=True)) % 9999}",
        "storage-profile": {"type": "s3", "bucket": "bkt", "region": "us-east-1",
                            "sts-enabled": False, "key-prefix": "p", "endpoint": EP,
                            "path-style-access": True, **profile},
        "storage-credential": {"type": "s3", "credential-type": "access-key",
                               "access-key-id": AK, "secret-access-key": SK},
    }
    resp = await client.post("/management/v1/warehouse", json=body)
    assert resp.status == 201, await resp.text()
    wid = str((await resp.json())["warehouse-id"])
    assert (await client.post(f"/catalog/v1/{wid}/namespaces",
                              json={"namespace": ["n"]})).status == 200
    return wid


def _table(client: TestClient, wid: str, name: str = "t", tid: str = TID) -> str:
    """An Iceberg table row at s3://bkt/p/<tid> (no metadata file: the signer never reads it)."""
    st = client.app[STATE]
    ns = st.store.get_namespace(wid, ["n"])
    assert ns is not None
    location = f"s3://bkt/p/{tid}"
    schema = Schema(NestedField(1, "id", LongType(), required=False))
    meta = create_metadata(CreateIcebergTable(name=name, schema=schema), location, tid)
    client.app[ICEBERG].store.create(table_id=tid, ns=ns, name=name, location=location,
                                     metadata_location=f"{location}/metadata/00000-x.metadata.json",
                                     metadata_json=dump_metadata(meta))
    return location


def _req(uri: str, method: str = "GET", **extra: Any) -> dict[str, Any]:
    return {"region": "us-east-1", "uri": uri, "method": method,
            "headers": {"User-Agent": ["x"], "Range": ["bytes=0-9"]}, **extra}


def _by_id(wid: str, tid: str = TID) -> str:
    return f"/catalog/v1/signer/{wid}/tabular-id/{tid}/v1/aws/s3/sign"


async def test_sign_matches_botocores_signature_and_leaves_range_unsigned(client):
    wid = await _warehouse(client)
    _table(client, wid)
    uri = f"{EP}/bkt/p/{TID}/data/f.parquet"
    resp = await client.post(_by_id(wid), json=_req(uri))
    assert resp.status == 200, await resp.text()
    body = await resp.json()
    assert body["uri"] == uri
    headers = body["headers"]
    assert headers["Range"] == ["bytes=0-9"]
    assert headers["Cache-Control"] == ["private"]
    assert headers["x-amz-content-sha256"] == ["UNSIGNED-PAYLOAD"]
    assert "range" not in headers["authorization"][0].split("SignedHeaders=")[1].split(",")[0]
    # botocore's own signature of the same request (without Range) at the same time
    expected = AWSRequest(method="GET", url=uri,
                          headers={"X-Amz-Content-SHA256": "UNSIGNED-PAYLOAD"})
    auth = S3SigV4Auth(Credentials(AK, SK), "s3", "us-east-1")
    when = datetime.datetime.fromtimestamp(NOW_S, datetime.UTC).replace(tzinfo=None)
    canonical = auth.canonical_request(_timestamped(expected, when))
    sig = auth.signature(auth.string_to_sign(expected, canonical), expected)
    assert headers["authorization"][0].endswith(f"Signature={sig}")
    assert client.app[STATE].stats.snapshot()["signed"] == 1


def _timestamped(req: AWSRequest, when: datetime.datetime) -> AWSRequest:
    req.context["timestamp"] = when.strftime("%Y%m%dT%H%M%SZ")
    req.headers["X-Amz-Date"] = req.context["timestamp"]
    return req


async def test_every_route_finds_the_table(client):
    wid = await _warehouse(client)
    _table(client, wid)
    uri = f"{EP}/bkt/p/{TID}/metadata/m.json"
    for path in (_by_id(wid), f"/catalog/v1/{wid}/v1/aws/s3/sign",
                 f"/catalog/v1/{wid}/namespaces/n/tables/t/sign",
                 _by_id(wid, "01900000-0000-7000-8000-00000000ffff")):  # unknown id: by location
        resp = await client.post(path, json=_req(uri))
        assert resp.status == 200, (path, await resp.text())
    resp = await client.post("/catalog/v1/aws/s3/sign", json=_req(uri))
    assert resp.status == 400  # no warehouse


async def test_out_of_table_uris_are_refused(client):
    wid = await _warehouse(client)
    loc = _table(client, wid)
    tid = loc.rsplit("/", 1)[1]
    cases = {
        f"{EP}/bkt/p/{tid}_other/f": (403, 404),  # a sibling sharing the prefix
        f"{EP}/other/p/{tid}/f": (403, 404),  # another bucket
        f"{EP}/bkt/p/{tid}/%2E%2E/x/f": (400,),  # an encoded `..`
        f"{EP}/bkt/p/{tid}/a%2F..%2F..%2Fx": (400,),  # an encoded separator
        f"ftp://127.0.0.1/bkt/p/{tid}/f": (400,),
    }
    for uri, statuses in cases.items():
        resp = await client.post(_by_id(wid), json=_req(uri))
        assert resp.status in statuses, (uri, resp.status, await resp.text())
    wrong_region = {**_req(f"{EP}/bkt/p/{tid}/f"), "region": "eu-west-1"}
    resp = await client.post(_by_id(wid), json=wrong_region)
    assert resp.status == 400
    assert client.app[STATE].stats.snapshot().get("signed", 0) == 0


async def test_read_role_gets_no_write_signed_and_delete_objects_is_bound_by_its_body(client):
    wid = await _warehouse(client)
    loc = _table(client, wid)
    tid = loc.rsplit("/", 1)[1]
    read = {"x-assume-role": READ_ROLE}
    for method, uri in (("PUT", f"{EP}/bkt/p/{tid}/f"), ("DELETE", f"{EP}/bkt/p/{tid}/f"),
                        ("POST", f"{EP}/bkt/p/{tid}/f?uploads")):
        resp = await client.post(_by_id(wid), json=_req(uri, method), headers=read)
        assert resp.status == 403, (method, uri)
    assert (await client.post(_by_id(wid), json=_req(f"{EP}/bkt/p/{tid}/f"),
                              headers=read)).status == 200
    ok = await client.post(_by_id(wid), json=_req(f"{EP}/bkt/p/{tid}/f", "PUT"))
    assert ok.status == 200
    assert (await ok.json())["headers"]["Cache-Control"] == ["no-cache"]
    obj = "<Object><Key>{}</Key></Object>"
    xml = f"<Delete>{obj.format(f'p/{tid}/a')}{obj.format(f'p/{tid}/b')}</Delete>"
    resp = await client.post(_by_id(wid), json=_req(f"{EP}/bkt?delete", "POST", body=xml))
    assert resp.status == 200, await resp.text()
    sha = (await resp.json())["headers"]["x-amz-content-sha256"][0]
    assert sha == hashlib.sha256(xml.encode()).hexdigest()
    outside = f"<Delete>{obj.format(f'p/{tid}/a')}{obj.format('p/x')}</Delete>"
    resp = await client.post(_by_id(wid), json=_req(f"{EP}/bkt?delete", "POST", body=outside))
    assert resp.status == 403
    resp = await client.post(_by_id(wid), json=_req(f"{EP}/bkt?delete", "POST"))
    assert resp.status == 400
    assert (await resp.json())["error"]["type"] == "DeleteWithoutBody"
    resp = await client.post(_by_id(wid), json=_req(f"{EP}/bkt/p/{tid}/f", "PATCH"))
    assert resp.status == 405
    listing = f"{EP}/bkt?list-type=2&prefix=p/{tid}/"
    assert (await client.post(_by_id(wid), json=_req(listing))).status == 200
    for bad in (f"{EP}/bkt?list-type=2&prefix=p/{tid}", f"{EP}/bkt?versions",
                f"{EP}/bkt?list-type=2&prefix=p/{tid}/&prefix=p/"):
        assert (await client.post(_by_id(wid), json=_req(bad))).status in (400, 403), bad


async def test_signing_disabled_profile_is_refused(client):
    wid = await _warehouse(client, **{"remote-signing-enabled": False})
    _table(client, wid)
    resp = await client.post(_by_id(wid), json=_req(f"{EP}/bkt/p/{TID}/f"))
    assert resp.status == 403
    assert (await resp.json())["error"]["type"] == "RemoteSigningDisabled"


async def test_load_config_carries_both_signer_spellings(client):
    wid = await _warehouse(client)
    _table(client, wid)
    resp = await client.get(f"/catalog/v1/{wid}/namespaces/n/tables/t",
                            headers={"X-Iceberg-Access-Delegation": "remote-signing"})
    config = (await resp.json())["config"]
    endpoint = f"v1/signer/{wid}/tabular-id/{TID}/v1/aws/s3/sign"
    assert config["s3.remote-signing-enabled"] == "true"
    assert config["signer.endpoint"] == config["s3.signer.endpoint"] == endpoint
    assert config["signer.uri"] == config["s3.signer.uri"]
    assert config["signer.uri"].endswith("/catalog/")
    assert "s3.access-key-id" not in config
    assert (config["s3.signer"], config["py-io-impl"]) == (
        "S3V4RestSigner", "pyiceberg.io.fsspec.FsspecFileIO")


@pytest.mark.parametrize(
    ("header", "sts", "signs", "expected"),
    [
        ("", True, True, (True, False)),
        ("", False, True, (False, True)),
        ("", False, False, (False, False)),
        ("vended-credentials", True, True, (True, False)),
        ("vended-credentials", False, True, (False, True)),
        ("remote-signing", True, True, (False, True)),
        ("remote-signing", True, False, (True, False)),
        ("remote-signing", False, False, (False, False)),
        ("vended-credentials,remote-signing", True, True, (True, False)),
        ("vended-credentials,remote-signing", False, True, (False, True)),
        ("client-managed", True, True, (False, False)),
        ("Remote-Signing", False, True, (False, True)),  # unknown value: the server chooses
    ],
)
def test_delegation_selection_follows_lakekeeper(header, sts, signs, expected):
    values = {v.strip() for v in header.split(",")} if header else set()
    profile = {"type": "s3", "sts-enabled": sts, "remote-signing-enabled": signs}
    assert select_delegation(values, profile) == expected
