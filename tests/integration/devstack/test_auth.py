"""Authentication: bearer JWTs from the real IdP, validated against its JWKS; 401 otherwise."""

from __future__ import annotations

import httpx
import pytest

pytestmark = pytest.mark.integration


def _get(stack, headers: dict[str, str]) -> httpx.Response:
    info = stack.info
    wh, ns = info.warehouse.id, info.namespace
    url = f"{info.catalog.url}/lakekeeper/v1/{wh}/namespaces/{ns}/generic-tables"
    return httpx.get(url, headers=headers, timeout=10)


def _token(stack, client: str = "alice", **extra: str) -> str:
    c = stack.info.idp.clients[client]
    resp = httpx.post(
        stack.info.idp.token_url,
        data={"grant_type": "client_credentials", **extra},
        auth=(c.id, c.secret),
        timeout=10,
    )
    assert resp.status_code == 200, resp.text
    return str(resp.json()["access_token"])


def test_missing_header_is_401_missing_authorization_header(bare_stack):
    resp = _get(bare_stack, {})
    assert resp.status_code == 401
    assert resp.json()["error"]["type"] == "MissingAuthorizationHeader"
    assert resp.headers["Cache-Control"] == "private"


@pytest.mark.parametrize("value", ["Bearer garbage", "Bearer a.b.c", "Basic Zm9vOmJhcg=="])
def test_garbage_token_is_401_authentication_failed(bare_stack, value):
    resp = _get(bare_stack, {"Authorization": value})
    assert resp.status_code == 401
    assert resp.json()["error"]["type"] == "AuthenticationFailed"


def test_wrong_audience_token_is_401(bare_stack):
    token = _token(bare_stack, resource="urn:not-lakekeeper")
    assert _get(bare_stack, {"Authorization": f"Bearer {token}"}).status_code == 401


def test_tampered_signature_is_401(bare_stack):
    head, payload, sig = _token(bare_stack).split(".")
    tampered = f"{head}.{payload}.{sig[:-4]}AAAA"
    assert _get(bare_stack, {"Authorization": f"Bearer {tampered}"}).status_code == 401


def test_valid_token_is_accepted_and_whoami_names_the_client(bare_stack):
    headers = {"Authorization": f"Bearer {_token(bare_stack, 'bob')}"}
    assert _get(bare_stack, headers).status_code == 200
    me = httpx.get(f"{bare_stack.info.catalog.url}/management/v1/whoami", headers=headers)
    assert me.json()["id"] == "oidc~bob"


def test_idp_accepts_basic_and_post_and_refuses_a_wrong_secret(bare_stack):
    idp = bare_stack.info.idp
    c = idp.clients["gateway"]
    post = httpx.post(
        idp.token_url,
        data={
            "grant_type": "client_credentials",
            "client_id": c.id,
            "client_secret": c.secret,
        },
    )
    assert post.status_code == 200
    assert post.json()["expires_in"] == idp.token_ttl_s
    wrong = httpx.post(
        idp.token_url,
        data={"grant_type": "client_credentials"},
        auth=(c.id, c.secret + "x"),
    )
    assert wrong.status_code == 401
    assert wrong.json()["error"] == "invalid_client"


def test_idp_counts_token_requests(bare_stack):
    issuer = bare_stack.info.idp.issuer
    httpx.post(f"{issuer}/_idp/stats/reset")
    _token(bare_stack)
    _token(bare_stack)
    assert httpx.get(f"{issuer}/_idp/stats").json() == {"token_requests": 2}
