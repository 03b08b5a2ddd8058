"""The hostile JWTs the isolation suite sends are really bad (else the suite is vacuous)."""

from __future__ import annotations

import json

import jwt
import pytest

from hardening.isolation import AUDIENCE, ISSUER, JwksServer, _secrets_in


@pytest.fixture(scope="module")
def jwks() -> JwksServer:
    return JwksServer()


def verify(jwks: JwksServer, token: str) -> dict[str, object]:
    return jwt.decode(
        token,
        jwks.key.public_key(),
        algorithms=["RS256"],
        audience=AUDIENCE,
        issuer=ISSUER,
        options={"require": ["exp", "iss", "aud", "sub"]},
    )


def test_a_good_token_verifies_with_the_served_key(jwks: JwksServer) -> None:
    assert verify(jwks, jwks.mint("alice"))["sub"] == "alice"


def test_every_bad_token_fails_verification(jwks: JwksServer) -> None:
    bad = jwks.bad_tokens()
    assert len(bad) >= 10
    for name, token in bad.items():
        with pytest.raises(jwt.PyJWTError):
            verify(jwks, token)
        assert name


def test_secrets_are_found_in_every_answer_shape() -> None:
    native = json.dumps(
        {
            "credentials": [
                {
                    "config": {
                        "s3.access-key-id": "ASIAAAAAAAAAAAAAAAAA",
                        "s3.secret-access-key": "s" * 40,
                    }
                }
            ]
        }
    )
    aws = json.dumps(
        {"AccessKeyId": "ASIABBBBBBBBBBBBBBBB", "SecretAccessKey": "t" * 40, "Token": "u" * 64}
    )
    assert _secrets_in(native) == {"ASIAAAAAAAAAAAAAAAAA", "s" * 40}
    assert _secrets_in(aws) == {"ASIABBBBBBBBBBBBBBBB", "t" * 40, "u" * 64}
