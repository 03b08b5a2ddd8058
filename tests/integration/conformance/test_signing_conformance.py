"""Iceberg loads against Lakekeeper's delegation rule, on both targets and both warehouses.

Lakekeeper (`service/storage/s3.rs`): an asked-for mechanism is honoured when the profile
allows it; neither asked (or none possible) -> vend if STS is on, else sign; `client-managed`
alone -> nothing. The stack's `demo` warehouse has STS on, `demo_signing` STS off (both with
remote signing enabled). The gateway answers as the emulator does, except that a caller
listing `remote-signing` is always signed for (never given keys), which the spec allows ("the
server may choose ... any of the requested mechanisms"), and that its signer is the node's.
"""

from __future__ import annotations

import uuid

import pytest

from devstack.emulator.signer import select_delegation
from tests.integration.conformance.conftest import Target

pytestmark = pytest.mark.integration

SCHEMA = {"type": "struct", "schema-id": 0,
          "fields": [{"id": 1, "name": "id", "type": "long", "required": False}]}
HEADERS = ["", "vended-credentials", "remote-signing", "vended-credentials,remote-signing",
           "client-managed", "bogus"]
SIGNER_KEYS = ("signer.uri", "s3.signer.uri", "signer.endpoint", "s3.signer.endpoint")


def _expected(target: Target, header: str, sts: bool) -> tuple[bool, bool]:
    values = {v.strip() for v in header.split(",")} if header else set()
    if target.name == "gateway" and "remote-signing" in values:
        return False, True
    return select_delegation(values, {"type": "s3", "sts-enabled": sts})


@pytest.mark.parametrize("storage", ["s3", "s3-signing"])
def test_iceberg_load_answers_follow_lakekeepers_delegation_rule(target: Target, storage: str):
    wh = target.info.warehouse_for(storage).id
    ns = target.ns
    name = f"dl_{uuid.uuid4().hex[:8]}"
    created = target.http.post(f"/catalog/v1/{wh}/namespaces/{ns}/tables",
                               json={"name": name, "schema": SCHEMA},
                               headers={"X-Iceberg-Access-Delegation": "client-managed"})
    assert created.status_code == 200, created.text
    base = target.info.gateway_url if target.name == "gateway" else target.info.catalog.url
    for header in HEADERS:
        extra = {"X-Iceberg-Access-Delegation": header} if header else {}
        resp = target.http.get(f"/catalog/v1/{wh}/namespaces/{ns}/tables/{name}", headers=extra)
        assert resp.status_code == 200, (header, resp.text)
        doc = resp.json()
        config = doc["config"]
        vend, sign = _expected(target, header, storage == "s3")
        assert ("storage-credentials" in doc) is vend, (header, doc.get("storage-credentials"))
        assert ("s3.session-token" in config) is vend, header
        assert ("s3.remote-signing-enabled" in config) is sign, (header, config)
        if sign:
            assert all(k in config for k in SIGNER_KEYS), header
            assert config["signer.uri"] == config["s3.signer.uri"] == base + "/catalog/"
            assert config["signer.endpoint"] == config["s3.signer.endpoint"]
            assert (config["s3.signer"], config["py-io-impl"]) == (
                "S3V4RestSigner", "pyiceberg.io.fsspec.FsspecFileIO")
    target.http.delete(f"/catalog/v1/{wh}/namespaces/{ns}/tables/{name}")
