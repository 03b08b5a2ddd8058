"""jwt callers against an in-cluster-style issuer: JWKS over TLS with a private CA and a bearer.

The Kubernetes API server serves /openid/v1/jwks over TLS signed by the cluster CA and only to an
authenticated client. This runs a real TLS JWKS endpoint with a self-signed certificate that
demands a bearer token, and checks the gateway trusts exactly the configured CA, sends the token
from the file (re-read on each fetch: kubelet rotates it) and verifies a token signed by the key.
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jwt
import pytest
from aiohttp import web
from cryptography.hazmat.primitives.asymmetric import rsa

from gateway.errors import UnauthenticatedError
from gateway.surfaces.callers import JwksKeys, JwtCallerAuth
from tests.unit.surfaces.fake_operations import FakeClock
from tests.unit.tls_certs import https_server, self_signed

AUD = "lakegate"
ISS = "https://kubernetes.default.svc.cluster.local"
SUB = "system:serviceaccount:team-a:spark"


@pytest.fixture
def signing_key() -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


@dataclass(frozen=True)
class Issuer:
    """The JWKS endpoint under test: its URL, its CA, the bearer file it checks, what it saw."""

    url: str
    ca: Path
    bearer: Path
    seen: list[str | None]


@pytest.fixture
async def issuer(tmp_path: Path, signing_key: rsa.RSAPrivateKey) -> AsyncIterator[Issuer]:
    """A TLS JWKS endpoint that answers 401 unless the bearer is the current token file's."""
    cert, key = self_signed(tmp_path)
    bearer = tmp_path / "token"
    bearer.write_text("gateway-sa-token-1\n")
    jwk = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(signing_key.public_key()))
    jwk.update({"kid": "k1", "use": "sig", "alg": "RS256"})
    seen: list[str | None] = []

    async def jwks(request: web.Request) -> web.Response:
        auth = request.headers.get("Authorization")
        seen.append(auth)
        if auth != f"Bearer {bearer.read_text().strip()}":
            return web.json_response({"message": "Unauthorized"}, status=401)
        return web.json_response({"keys": [jwk]})

    app = web.Application()
    app.router.add_get("/openid/v1/jwks", jwks)
    server = await https_server(app, cert, key)
    yield Issuer(str(server.make_url("/openid/v1/jwks")), cert, bearer, seen)
    await server.close()


def _auth(issuer: Issuer, **kwargs: Any) -> JwtCallerAuth:
    clock = FakeClock()
    clock.wall = time.time()  # PyJWT checks exp against real time
    keys = JwksKeys(issuer.url, clock, min_refresh_s=0, **kwargs)
    return JwtCallerAuth(keys, clock, audience=AUD, issuer=ISS)


def _token(key: rsa.RSAPrivateKey, kid: str = "k1") -> str:
    claims = {"sub": SUB, "aud": AUD, "iss": ISS, "exp": int(time.time()) + 600}
    return jwt.encode(claims, key, algorithm="RS256", headers={"kid": kid})


async def test_ca_and_bearer_file_reach_the_issuer_and_verify_the_caller(
    issuer: Issuer, signing_key: rsa.RSAPrivateKey
) -> None:
    auth = _auth(issuer, ca_file=issuer.ca, bearer_token_file=issuer.bearer)
    caller = await auth.authenticate(f"Bearer {_token(signing_key)}")
    assert caller.name == SUB
    assert issuer.seen == ["Bearer gateway-sa-token-1"]
    # kubelet rotated the gateway's token: the next fetch sends the new one.
    issuer.bearer.write_text("gateway-sa-token-2\n")
    with pytest.raises(UnauthenticatedError):
        await auth.authenticate(f"Bearer {_token(signing_key, kid='k2')}")
    assert issuer.seen[-1] == "Bearer gateway-sa-token-2"


@pytest.mark.parametrize(
    ("given", "seen"),
    [
        (("bearer_token_file",), []),  # no CA: the TLS handshake fails before any request
        (("ca_file",), [None]),  # no bearer: the issuer refuses
    ],
    ids=["without-the-cluster-ca", "without-the-bearer"],
)
async def test_an_issuer_missing_its_ca_or_bearer_is_unavailable(
    issuer: Issuer, signing_key: rsa.RSAPrivateKey, given: tuple[str, ...],
    seen: list[str | None],
) -> None:
    files = {"ca_file": issuer.ca, "bearer_token_file": issuer.bearer}
    auth = _auth(issuer, **{name: files[name] for name in given})
    with pytest.raises(UnauthenticatedError, match="JWKS unavailable"):
        await auth.authenticate(f"Bearer {_token(signing_key)}")
    assert issuer.seen == seen
