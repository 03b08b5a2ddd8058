"""Lakekeeper's parsing and error rules on the compatible surface (lakekeeper_compat.py)."""

from __future__ import annotations

import json

import pytest

from gateway.errors import InvalidRequestError, PermissionDeniedError, UnauthenticatedError
from gateway.surfaces.lakekeeper_compat import (
    client_managed,
    gateway_refresh_endpoints,
    idempotency_key,
    lakekeeper_bool,
    lakekeeper_error,
)

TABLE = ("lakekeeper", "v1", "{wh}", "namespaces", "{ns}", "generic-tables", "{table}")


@pytest.mark.parametrize(
    ("lines", "expected"),
    [
        ([], False),
        (["client-managed"], True),
        (["bogus, client-managed"], True),
        (["client-managed", "vended-credentials"], False),  # several lines are merged
        (["client-managed,remote-signing"], False),
        (["Client-Managed"], False),  # values are case-sensitive: unknown -> server vends
        (["remote-signing"], False),
    ],
)
def test_only_client_managed_alone_turns_vending_off(lines, expected):
    assert client_managed(lines) is expected


@pytest.mark.parametrize("value", ["1", "t", "T", "TRUE", "true", "True"])
def test_true_spellings(value):
    assert lakekeeper_bool(value, "force", False) is True


@pytest.mark.parametrize("value", ["0", "f", "F", "FALSE", "false", "False"])
def test_false_spellings(value):
    assert lakekeeper_bool(value, "force", True) is False


@pytest.mark.parametrize("value", ["yes", "no", "tRUE", " true", "", "2"])
def test_other_spellings_are_400(value):
    with pytest.raises(InvalidRequestError):
        lakekeeper_bool(value, "force", False)


def test_absent_boolean_is_the_default():
    assert lakekeeper_bool(None, "purgeRequested", None) is None


def test_401_types_follow_lakekeeper():
    missing = lakekeeper_error(UnauthenticatedError("missing caller token"), TABLE, None)
    assert (missing.status, missing.type_name) == (401, "MissingAuthorizationHeader")
    bad = lakekeeper_error(UnauthenticatedError("unknown caller token"), TABLE, "Bearer x")
    assert (bad.status, bad.type_name) == (401, "AuthenticationFailed")


def test_a_denied_table_is_404_not_403():
    err = lakekeeper_error(PermissionDeniedError("policy"), TABLE, "Bearer x")
    assert (err.status, err.type_name) == (404, "NoSuchGenericTableException")
    assert isinstance(err, PermissionDeniedError)  # still counted as a denial


def test_a_denied_namespace_call_stays_403():
    pattern = ("catalog", "v1", "{wh}", "namespaces")
    err = lakekeeper_error(PermissionDeniedError("policy"), pattern, "Bearer x")
    assert err.status == 403


def test_refresh_endpoint_is_pointed_at_the_gateway():
    body = json.dumps({
        "storage-credentials": [{"prefix": "s3://b/t", "config": {
            "client.refresh-credentials-endpoint":
                "http://catalog:8181/catalog/v1/wh/namespaces/ns/tables/t/credentials",
            "s3.region": "us-east-1"}}],
    }).encode()
    doc = json.loads(gateway_refresh_endpoints(body, "http://127.0.0.1:9464/"))
    cfg = doc["storage-credentials"][0]["config"]
    assert cfg["client.refresh-credentials-endpoint"] == (
        "http://127.0.0.1:9464/catalog/v1/wh/namespaces/ns/tables/t/credentials")
    assert cfg["s3.region"] == "us-east-1"


def test_bodies_without_the_key_are_untouched():
    body = b'{"storage-credentials": []}'
    assert gateway_refresh_endpoints(body, "http://gw") is body
    assert gateway_refresh_endpoints(b"not json client.refresh-credentials-endpoint", "http://gw")\
        == b"not json client.refresh-credentials-endpoint"


def test_idempotency_key_is_checked_like_lakekeeper():
    key = "0198f2a4-6c1e-7d32-9a51-3f0b2c7e9d10"
    assert idempotency_key([key]) == key
    assert idempotency_key([]) is None
    assert idempotency_key(["  "]) is None
    with pytest.raises(InvalidRequestError) as info:
        idempotency_key(["not-a-uuid"])
    assert info.value.type_name == "InvalidIdempotencyKey"
    with pytest.raises(InvalidRequestError) as info:
        idempotency_key([key, key])
    assert info.value.type_name == "DuplicateIdempotencyKey"
