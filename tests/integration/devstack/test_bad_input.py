"""Bad input gets Lakekeeper's status and body shape (envelope or axum plain text), never a 5xx."""

from __future__ import annotations

import uuid

import httpx
import pytest

pytestmark = pytest.mark.integration


def _envelope(resp: httpx.Response, status: int, error_type: str) -> None:
    assert resp.status_code == status, resp.text
    err = resp.json()["error"]
    assert (err["code"], err["type"]) == (status, error_type)
    assert err["stack"][-1].startswith("Error ID: ")


def test_malformed_json_is_plain_400(catalog):
    resp = catalog.http.post(
        catalog.tables_path(), content=b"{not json", headers={"Content-Type": "application/json"}
    )
    assert resp.status_code == 400
    assert resp.text.startswith("Failed to parse the request body as JSON")


def test_missing_content_type_is_415(catalog):
    resp = catalog.http.post(catalog.tables_path(), content=b'{"name": "x", "format": "lance"}')
    assert resp.status_code == 415


@pytest.mark.parametrize(
    "body", [{"name": "x"}, {"name": "x", "format": "   "}, {"name": 3, "format": "lance"}]
)
def test_undeserialisable_body_is_plain_422(catalog, body):
    resp = catalog.http.post(catalog.tables_path(), json=body)
    assert resp.status_code == 422
    assert resp.text.startswith("Failed to deserialize the JSON body")


@pytest.mark.parametrize(
    ("body", "error_type"),
    [
        ({"name": "", "format": "lance"}, "InvalidName"),
        ({"name": "a+b", "format": "lance"}, "InvalidName"),
        ({"name": "ok", "format": "Lance"}, "InvalidFormat"),
        (
            {"name": "ok", "format": "lance", "base-location": "s3://other-bucket/x"},
            "InvalidLocation",
        ),
    ],
)
def test_bad_table_fields_are_400_envelopes(catalog, body, error_type):
    _envelope(catalog.http.post(catalog.tables_path(), json=body), 400, error_type)


def test_bad_namespace_in_path_is_400(catalog):
    _envelope(catalog.http.get(catalog.tables_path("a%1F")), 400, "NamespacePartEmpty")


def test_unknown_namespace_is_404(catalog):
    _envelope(catalog.http.get(catalog.tables_path("nope")), 404, "NoSuchNamespaceException")


def test_unknown_warehouse_is_404_and_a_name_prefix_is_400(catalog):
    resp = catalog.http.get(f"/lakekeeper/v1/{uuid.uuid4()}/namespaces/x/generic-tables")
    _envelope(resp, 404, "NoSuchWarehouseException")
    resp = catalog.http.get("/lakekeeper/v1/demo/namespaces/x/generic-tables")
    _envelope(resp, 400, "WarehouseIdIsNotUUID")
    _envelope(
        catalog.http.get("/catalog/v1/config", params={"warehouse": "nope"}),
        404,
        "NoSuchWarehouseException",
    )
    _envelope(catalog.http.get("/catalog/v1/config"), 400, "GetConfigNoWarehouseProvided")


@pytest.mark.parametrize("token", ["garbage!", "MSYxJjI", "bm90LWEtdG9rZW4"])
def test_bad_page_token_is_400(catalog, token):
    _envelope(
        catalog.http.get(catalog.tables_path(), params={"pageToken": token}),
        400,
        "InvalidPaginationToken",
    )


def test_non_integer_page_size_is_plain_400(catalog):
    resp = catalog.http.get(catalog.tables_path(), params={"pageSize": "ten"})
    assert resp.status_code == 400
    assert resp.text.startswith("Failed to deserialize query string")


def test_oversized_body_is_413(catalog):
    big = b'{"name": "x", "format": "lance", "doc": "' + b"a" * (33 * 1024 * 1024) + b'"}'
    resp = catalog.http.post(
        catalog.tables_path(), content=big, headers={"Content-Type": "application/json"}
    )
    assert resp.status_code == 413


def test_unknown_table_is_404_masked(catalog):
    _envelope(catalog.http.get(f"{catalog.tables_path()}/nope"), 404, "NoSuchGenericTableException")
    _envelope(
        catalog.http.get(f"{catalog.tables_path()}/nope/credentials"),
        404,
        "NoSuchGenericTableException",
    )


def test_bad_idempotency_key_is_400(catalog):
    resp = catalog.http.post(
        catalog.tables_path(),
        json={"name": "k", "format": "lance"},
        headers={"Idempotency-Key": "not-a-uuid"},
    )
    _envelope(resp, 400, "InvalidIdempotencyKey")


def test_headers_request_id_echo_cache_control_and_vary(catalog):
    resp = catalog.http.get(catalog.tables_path(), headers={"x-request-id": "abc-123"})
    assert resp.headers["x-request-id"] == "abc-123"
    assert resp.headers["Cache-Control"] == "private"
    assert "x-iceberg-access-delegation" in resp.headers["Vary"]
    generated = catalog.http.get(catalog.tables_path()).headers["x-request-id"]
    assert uuid.UUID(generated).version == 7
    health = catalog.http.get("/health")
    assert health.status_code == 200
    assert "Cache-Control" not in health.headers


@pytest.mark.parametrize(
    "body",
    [
        {"requirements": [], "updates": [{"action": "set-properties", "updates": None}]},
        {"requirements": [], "updates": [{"action": "set-properties", "updates": 5}]},
        {"requirements": [], "updates": [{"action": "set-properties", "updates": ["a"]}]},
        {"requirements": [], "updates": [{"action": "set-properties", "updates": "x"}]},
    ],
)
def test_a_wrong_shape_inside_an_iceberg_commit_is_plain_422_not_500(catalog, body):
    """pyiceberg's validators raise AttributeError on these shapes (not a ValueError pydantic
    would wrap); the emulator must still answer serde's 422, as Lakekeeper does."""
    path = f"/catalog/v1/{catalog.wh}/namespaces/{catalog.ns}/tables/absent_{uuid.uuid4().hex[:6]}"
    resp = catalog.http.post(path, json=body)
    assert resp.status_code == 422, resp.text
    assert resp.text.startswith("Failed to deserialize the JSON body")
