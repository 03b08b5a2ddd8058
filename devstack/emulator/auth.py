"""Bearer-JWT authentication like Lakekeeper's OIDC authenticator.

The provider is discovered from `<uri>/.well-known/openid-configuration` (issuer, jwks_uri);
tokens are validated locally (RS256 signature, issuer, audience any-of, expiry). Validated
tokens are memoised until their `exp` so the hot path does no RSA work per request.
Failures map to 401 `MissingAuthorizationHeader` / `AuthenticationFailed` as in Lakekeeper.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from typing import Any

import aiohttp
import jwt

from devstack.emulator.errors import ApiError

_MAX_MEMO = 10_000
_JWKS_REFETCH_MIN_S = 5.0


@dataclass(frozen=True)
class Principal:
    """The authenticated caller."""

    subject: str
    user_id: str
    claims: dict[str, Any]


ANONYMOUS = Principal(subject="anonymous", user_id="anonymous", claims={})


def missing_header() -> ApiError:
    return ApiError(401, "MissingAuthorizationHeader", "Missing Authorization Header")


def auth_failed() -> ApiError:
    return ApiError(401, "AuthenticationFailed", "Authentication failed")


class JwtAuthenticator:
    """Validates bearer JWTs against one OpenID provider's JWKS."""

    def __init__(self, provider_uri: str, audiences: list[str]) -> None:
        self._provider_uri = provider_uri.rstrip("/")
        self._audiences = audiences
        self._issuer: str | None = None
        self._jwks_uri: str | None = None
        self._keys: dict[str, Any] = {}
        self._last_fetch = -1e9
        self._lock = asyncio.Lock()
        self._memo: dict[str, tuple[Principal, float]] = {}

    async def authenticate(self, header: str | None) -> Principal:
        """Principal for an `Authorization` header value, or raise a 401 ApiError."""
        if not header:
            raise missing_header()
        scheme, _, token = header.partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            raise auth_failed()
        token = token.strip()
        memo = self._memo.get(token)
        if memo is not None:
            principal, exp = memo
            if time.time() < exp:
                return principal
            del self._memo[token]
        principal, exp = await self._validate(token)
        if len(self._memo) >= _MAX_MEMO:
            self._memo.clear()
        self._memo[token] = (principal, exp)
        return principal

    async def _validate(self, token: str) -> tuple[Principal, float]:
        try:
            header = jwt.get_unverified_header(token)
        except jwt.PyJWTError as exc:
            raise auth_failed() from exc
        kid = header.get("kid")
        key = await self._key(kid)
        if key is None or self._issuer is None:
            raise auth_failed()
        try:
            claims: dict[str, Any] = jwt.decode(
                token,
                key=key,
                algorithms=["RS256", "RS384", "RS512", "ES256", "PS256"],
                audience=self._audiences,
                issuer=self._issuer,
                options={"require": ["exp", "iss", "sub"]},
            )
        except jwt.PyJWTError as exc:
            raise auth_failed() from exc
        subject = str(claims.get("oid") or claims["sub"])
        principal = Principal(subject=subject, user_id=f"oidc~{subject}", claims=claims)
        return principal, float(claims["exp"])

    async def _key(self, kid: str | None) -> Any:
        if kid in self._keys:
            return self._keys[kid]
        async with self._lock:
            if kid in self._keys:
                return self._keys[kid]
            if time.monotonic() - self._last_fetch < _JWKS_REFETCH_MIN_S and self._keys:
                return None
            await self._fetch()
        return self._keys.get(kid) if kid is not None else next(iter(self._keys.values()), None)

    async def _fetch(self) -> None:
        self._last_fetch = time.monotonic()
        timeout = aiohttp.ClientTimeout(total=5)
        try:
            async with aiohttp.ClientSession(timeout=timeout) as session:
                if self._jwks_uri is None:
                    url = f"{self._provider_uri}/.well-known/openid-configuration"
                    async with session.get(url) as resp:
                        resp.raise_for_status()
                        discovery = await resp.json()
                    self._issuer = str(discovery["issuer"])
                    self._jwks_uri = str(discovery["jwks_uri"])
                async with session.get(self._jwks_uri) as resp:
                    resp.raise_for_status()
                    jwks = await resp.json()
        except (aiohttp.ClientError, TimeoutError, KeyError, ValueError) as exc:
            raise auth_failed() from exc
        keys: dict[str, Any] = {}
        for jwk in jwks.get("keys", []):
            try:
                parsed = jwt.PyJWK.from_dict(jwk)
            except jwt.PyJWTError:
                continue
            keys[str(jwk.get("kid"))] = parsed.key
        self._keys = keys
