"""Caller authentication: static tokens and locally verified JWTs (real JWKS over HTTP)."""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator

import jwt
import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer
from cryptography.hazmat.primitives.asymmetric import rsa

from gateway.errors import CallerAuthUnavailableError, UnauthenticatedError
from gateway.surfaces.callers import (
    ANONYMOUS,
    JwksKeys,
    JwtCallerAuth,
    NoCallerAuth,
    StaticTokenCallerAuth,
    bearer_value,
)
from tests.unit.surfaces.fake_operations import NOW_S, FakeClock

AUD = "urn:lakegate"
ISS = "http://idp.test"


@pytest.mark.parametrize(
    ("header", "value"),
    [("Bearer abc", "abc"), ("bearer  abc ", "abc"), ("abc", "abc"), ("", None), (None, None),
     ("Bearer ", "Bearer")],
)
def test_bearer_value(header, value) -> None:
    assert bearer_value(header) == value


async def test_none_mode_ignores_whatever_is_sent() -> None:
    assert await NoCallerAuth().authenticate("Bearer junk") == ANONYMOUS


async def test_static_tokens_map_to_callers_and_are_not_in_the_repr() -> None:
    auth = StaticTokenCallerAuth({"s3cr3t-token-a": "alice"})
    assert (await auth.authenticate("Bearer s3cr3t-token-a")).name == "alice"
    for bad in (None, "Bearer nope"):
        with pytest.raises(UnauthenticatedError):
            await auth.authenticate(bad)
    assert "s3cr3t" not in repr(auth)


@pytest.fixture
def rsa_key() -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


@pytest.fixture
async def jwks_server(rsa_key) -> AsyncIterator[TestServer]:
    jwk = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(rsa_key.public_key()))
    jwk.update({"kid": "k1", "use": "sig", "alg": "RS256"})
    hits = {"n": 0}

    async def jwks(request: web.Request) -> web.Response:
        hits["n"] += 1
        return web.json_response({"keys": [jwk]})

    app = web.Application()
    app.router.add_get("/jwks", jwks)
    server = TestServer(app)
    await server.start_server()
    server.hits = hits  # type: ignore[attr-defined]
    yield server
    await server.close()


def token(key, **claims) -> str:
    base = {"sub": "spark-exec", "aud": AUD, "iss": ISS, "exp": int(NOW_S) + 600}
    base.update(claims)
    return jwt.encode(base, key, algorithm="RS256", headers={"kid": claims.pop("kid", "k1")})


@pytest.fixture
def jwt_auth(jwks_server: TestServer, clock: FakeClock) -> JwtCallerAuth:
    # PyJWT checks exp against the real time; use real "now" for the fake wall clock too.
    clock.step_wall(time.time() - clock.now())
    keys = JwksKeys(str(jwks_server.make_url("/jwks")), clock)
    return JwtCallerAuth(keys, clock, audience=AUD, issuer=ISS)


async def test_valid_jwt_is_accepted_and_cached(jwt_auth, rsa_key, jwks_server) -> None:
    tok = token(rsa_key, exp=int(time.time()) + 600)
    caller = await jwt_auth.authenticate(f"Bearer {tok}")
    assert caller.name == "spark-exec"
    assert caller.authenticated
    await jwt_auth.authenticate(f"Bearer {tok}")
    assert jwks_server.hits["n"] == 1


@pytest.mark.parametrize(
    "claims",
    [{"aud": "urn:other"}, {"iss": "http://evil"}, {"exp": 1_000}, {"sub": None}],
)
async def test_bad_claims_are_refused(jwt_auth, rsa_key, claims) -> None:
    claims = {"exp": int(time.time()) + 600, **claims}
    if claims.get("sub", "x") is None:
        claims.pop("sub")
        tok = jwt.encode({k: v for k, v in {"aud": AUD, "iss": ISS, **claims}.items()},
                         rsa_key, algorithm="RS256", headers={"kid": "k1"})
    else:
        tok = token(rsa_key, **claims)
    with pytest.raises(UnauthenticatedError):
        await jwt_auth.authenticate(f"Bearer {tok}")


async def test_token_signed_by_another_key_is_refused(jwt_auth) -> None:
    other = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    with pytest.raises(UnauthenticatedError):
        await jwt_auth.authenticate(f"Bearer {token(other, exp=int(time.time()) + 600)}")


async def test_unknown_kid_refetches_at_most_once_per_interval(
    jwt_auth, rsa_key, jwks_server
) -> None:
    tok = token(rsa_key, exp=int(time.time()) + 600, kid="nope")
    for _ in range(3):
        with pytest.raises(UnauthenticatedError):
            await jwt_auth.authenticate(f"Bearer {tok}")
    assert jwks_server.hits["n"] == 1


async def test_garbage_token_is_refused(jwt_auth) -> None:
    with pytest.raises(UnauthenticatedError):
        await jwt_auth.authenticate("Bearer not.a.jwt")
    with pytest.raises(UnauthenticatedError):
        await jwt_auth.authenticate(None)


# ---- suspected JWT defects (issue #28) ---------------------------------------------------------

async def test_a_token_from_an_issuer_a_few_seconds_ahead_is_accepted(jwt_auth, rsa_key) -> None:
    now = int(time.time())
    fresh = token(rsa_key, exp=now + 600, nbf=now + 10, iat=now + 10)
    assert (await jwt_auth.authenticate(f"Bearer {fresh}")).name == "spark-exec"
    too_early = token(rsa_key, exp=now + 600, nbf=now + 300)
    with pytest.raises(UnauthenticatedError):
        await jwt_auth.authenticate(f"Bearer {too_early}")


async def test_a_key_removed_from_the_jwks_stops_verifying_cached_tokens(
    rsa_key, clock: FakeClock
) -> None:
    jwk = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(rsa_key.public_key()))
    jwk.update({"kid": "k1", "use": "sig", "alg": "RS256"})
    served = {"keys": [jwk]}

    async def jwks(request: web.Request) -> web.Response:
        return web.json_response(served)

    app = web.Application()
    app.router.add_get("/jwks", jwks)
    server = TestServer(app)
    await server.start_server()
    try:
        clock.step_wall(time.time() - clock.now())
        keys = JwksKeys(str(server.make_url("/jwks")), clock, max_age_s=300)
        auth = JwtCallerAuth(keys, clock, audience=AUD, issuer=ISS)
        tok = f"Bearer {token(rsa_key, exp=int(time.time()) + 3600)}"
        await auth.authenticate(tok)
        served["keys"] = []  # the key leaked: the IdP removed it
        clock.advance(299)
        await auth.authenticate(tok)  # within max_age the known keys are used
        clock.advance(2)
        with pytest.raises(UnauthenticatedError):
            await auth.authenticate(tok)
    finally:
        await server.close()


async def test_known_keys_stay_in_use_while_the_jwks_is_down(jwt_auth, rsa_key, jwks_server,
                                                             clock: FakeClock) -> None:
    tok = f"Bearer {token(rsa_key, exp=int(time.time()) + 3600)}"
    await jwt_auth.authenticate(tok)
    await jwks_server.close()
    clock.advance(400)
    assert (await jwt_auth.authenticate(tok)).name == "spark-exec"


@pytest.mark.parametrize("body", [b"<html>502 Bad Gateway</html>", b"\xff\xfe not utf-8",
                                  b'["a", "list"]'])
async def test_a_jwks_answering_non_json_refuses_the_caller_with_401(
        rsa_key, clock: FakeClock, body: bytes, make_client, fake_ops) -> None:  # type: ignore[no-untyped-def]
    """Issue #35 finding 7: an HTML error page from the JWKS endpoint escaped as a 500."""
    async def jwks(request: web.Request) -> web.Response:
        return web.Response(body=body, content_type="text/html")

    app = web.Application()
    app.router.add_get("/jwks", jwks)
    server = TestServer(app)
    await server.start_server()
    try:
        clock.step_wall(time.time() - clock.now())
        auth = JwtCallerAuth(JwksKeys(str(server.make_url("/jwks")), clock), clock,
                             audience=AUD, issuer=ISS)
        tok = f"Bearer {token(rsa_key, exp=int(time.time()) + 600)}"
        with pytest.raises(CallerAuthUnavailableError):
            await auth.authenticate(tok)
        client = await make_client(auth=auth)
        clock.advance(60)  # past the refetch interval: the surface's request fetches again
        resp = await client.get(
            "/v1/warehouses/demo/namespaces/demo_ns/tables/orders/credentials",
            headers={"Authorization": tok})
        assert resp.status == 401
        assert (await resp.json())["error"]["type"] == "Unauthenticated"
    finally:
        await server.close()
