"""Caller authentication (none | token | jwt) → CallerIdentity, shared by HTTP and gRPC.

- `none`: loopback/UDS only (settings refuse a non-loopback bind); every caller is "anonymous"
  and whatever Authorization it sends (pylakekeeper always sends one) is ignored.
- `token`: bearer tokens from a file `{"<token>": "<caller name>"}`; tokens are kept only as
  SHA-256 digests, so the daemon's memory and reprs never hold them in clear.
- `jwt`: audience-bound JWTs (e.g. Kubernetes projected service-account tokens) verified locally
  against a JWKS: signature, issuer, audience, expiry. The JWKS is fetched in a worker thread
  (blocking urllib, rare) and cached; verification itself is cheap and cached per token.

botocore sends `AWS_CONTAINER_AUTHORIZATION_TOKEN` as the raw Authorization value (no "Bearer"),
so both forms are accepted.
"""

from __future__ import annotations

import asyncio
import hashlib
import ssl
from dataclasses import KW_ONLY, dataclass, field
from pathlib import Path
from typing import Any, Protocol

import jwt
import yaml
from cachetools import LRUCache

from gateway.clock import Clock
from gateway.errors import CallerAuthUnavailableError, UnauthenticatedError
from gateway.models import CallerIdentity
from gateway.settings import CallerMode, CallerSettings

ANONYMOUS = CallerIdentity(name="anonymous", authenticated=False)
_JWT_ALGORITHMS = ("RS256", "RS384", "RS512", "ES256", "ES384", "PS256", "EdDSA")
# Clock skew allowed between the token's issuer and this node (exp, nbf, iat), as
# is usual for JWT validators: an IdP a few seconds ahead must not fail fresh tokens.
JWT_LEEWAY_S = 30


class CallerConfigError(ValueError):
    """The caller auth configuration (tokens file, JWKS) is unusable; raised at start."""


class CallerAuthenticator(Protocol):
    """Turns the Authorization header value (or gRPC `authorization` metadata) into a caller."""

    mode: CallerMode

    async def authenticate(self, authorization: str | None) -> CallerIdentity: ...

    def authenticate_now(self, authorization: str | None) -> CallerIdentity | None:
        """The caller when it is known without awaiting (the hot path), else None: await
        `authenticate`, which also raises every refusal."""
        ...


def bearer_value(authorization: str | None) -> str | None:
    """The token in `Bearer <t>` or a raw `<t>` header value; None when absent or blank."""
    if not authorization:
        return None
    value = authorization.strip()
    scheme, _, rest = value.partition(" ")
    if rest and scheme.lower() == "bearer":
        value = rest.strip()
    return value or None


def _digest(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


class NoCallerAuth:
    """Mode `none`: everyone is the anonymous caller."""

    mode = CallerMode.NONE

    async def authenticate(self, authorization: str | None) -> CallerIdentity:
        return ANONYMOUS

    def authenticate_now(self, authorization: str | None) -> CallerIdentity | None:
        return ANONYMOUS


class StaticTokenCallerAuth:
    """Mode `token`: a fixed map of bearer tokens to caller names."""

    mode = CallerMode.TOKEN

    def __init__(self, tokens: dict[str, str]) -> None:
        self._by_digest = {_digest(tok): name for tok, name in tokens.items()}

    def __repr__(self) -> str:
        return f"StaticTokenCallerAuth(callers={sorted(set(self._by_digest.values()))!r})"

    async def authenticate(self, authorization: str | None) -> CallerIdentity:
        token = bearer_value(authorization)
        if token is None:
            raise UnauthenticatedError("missing caller token")
        name = self._by_digest.get(_digest(token))
        if name is None:
            raise UnauthenticatedError("unknown caller token")
        return CallerIdentity(name=name, authenticated=True)

    def authenticate_now(self, authorization: str | None) -> CallerIdentity | None:
        """A known token's caller (a refusal is `authenticate`'s to raise)."""
        token = bearer_value(authorization)
        name = None if token is None else self._by_digest.get(_digest(token))
        return None if name is None else CallerIdentity(name=name, authenticated=True)

    @staticmethod
    def read_tokens(path: Path) -> dict[str, str]:
        """Parse the tokens file (YAML or JSON mapping token → caller name).

        Raises:
            CallerConfigError: unreadable or malformed (never echoing a token).
        """
        try:
            doc = yaml.safe_load(path.read_text(encoding="utf-8"))
        except (OSError, yaml.YAMLError) as exc:
            raise CallerConfigError(
                f"cannot read tokens file {path}: {type(exc).__name__}"
            ) from exc
        if not isinstance(doc, dict) or not doc:
            raise CallerConfigError(f"tokens file {path} must be a non-empty mapping token→name")
        return {str(k): str(v) for k, v in doc.items()}


@dataclass(eq=False, repr=False)
class JwksKeys:
    """The JWKS signing keys by `kid`, fetched off the event loop and refetched on unknown kid
    and when older than `max_age_s` (so a key removed from the JWKS, e.g. after a leak, stops
    verifying within that time; while the JWKS cannot be fetched the known keys stay in use).

    A refetch is rate-limited (min_refresh_s), so a flood of tokens with a bogus kid cannot turn
    into a flood of JWKS requests.
    """

    jwks_url: str
    clock: Clock
    min_refresh_s: float = 30.0
    max_age_s: float = 300.0
    _: KW_ONLY
    ca_file: Path | None = None
    bearer_token_file: Path | None = None
    _keys: dict[str, Any] = field(init=False, default_factory=dict)
    _fetched_at: float | None = field(init=False, default=None)
    _lock: asyncio.Lock = field(init=False, default_factory=asyncio.Lock)

    def _fetch(self) -> dict[str, Any]:
        # Runs in a worker thread. The bearer file is re-read per fetch: kubelet rotates it.
        headers: dict[str, Any] = {}
        try:
            if self.bearer_token_file is not None:
                bearer = self.bearer_token_file.read_text(encoding="utf-8").strip()
                headers["Authorization"] = f"Bearer {bearer}"
            context = (
                ssl.create_default_context(cafile=str(self.ca_file))
                if self.ca_file is not None
                else None
            )
        except (OSError, ssl.SSLError) as exc:  # a file gone since start: same as JWKS down
            raise jwt.PyJWKClientError(f"JWKS CA or bearer file: {type(exc).__name__}") from exc
        client = jwt.PyJWKClient(
            self.jwks_url, cache_jwk_set=False, timeout=10, headers=headers, ssl_context=context
        )
        try:
            signing = client.get_signing_keys()
        except jwt.PyJWKSetError:  # the JWKS answered without a usable key: none is valid
            return {}
        except (ValueError, OSError) as exc:
            # A body that is not JSON (json.load raises ValueError: an HTML error page, a
            # proxy's answer) or a connection dropped mid-body: the JWKS is unusable, as when
            # it is down. Not caught, it reached the surface as a 500.
            raise jwt.PyJWKClientError(f"JWKS answer unusable: {type(exc).__name__}") from exc
        return {k.key_id or "": k.key for k in signing}

    async def key_for(self, kid: str) -> Any:
        """The verification key for `kid`.

        Raises:
            UnauthenticatedError: no such key (after at most one rate-limited refetch).
        """
        if kid in self._keys and not self._stale():
            return self._keys[kid]
        async with self._lock:
            if (kid not in self._keys or self._stale()) and self._may_refresh():
                self._fetched_at = self.clock.monotonic()
                try:
                    self._keys = await asyncio.to_thread(self._fetch)
                except jwt.PyJWKClientError as exc:
                    if kid not in self._keys:
                        raise CallerAuthUnavailableError("caller JWKS unavailable") from exc
        if kid not in self._keys:
            if len(self._keys) == 1 and not kid:
                return next(iter(self._keys.values()))
            raise UnauthenticatedError("caller token signed by an unknown key")
        return self._keys[kid]

    def _stale(self) -> bool:
        return (self._fetched_at is not None
                and self.clock.monotonic() - self._fetched_at >= self.max_age_s)

    def _may_refresh(self) -> bool:
        return (
            self._fetched_at is None
            or self.clock.monotonic() - self._fetched_at >= self.min_refresh_s
        )


@dataclass(eq=False, repr=False)
class JwtCallerAuth:
    """Mode `jwt`: verify caller JWTs locally (signature, issuer, audience, expiry)."""

    mode = CallerMode.JWT

    keys: JwksKeys
    clock: Clock
    _: KW_ONLY
    audience: str
    issuer: str | None
    name_claim: str = "sub"
    cache_size: int = 4096
    # digest → (caller, exp, kid, key): a token verified once is not re-verified until it
    # expires, while the key that verified it is still the JWKS's key for its kid.
    _verified: LRUCache[str, tuple[CallerIdentity, float, str, Any]] = field(init=False)

    def __post_init__(self) -> None:
        self._verified = LRUCache(self.cache_size)

    async def authenticate(self, authorization: str | None) -> CallerIdentity:
        token = bearer_value(authorization)
        if token is None:
            raise UnauthenticatedError("missing caller token")
        digest = _digest(token)
        cached = self._verified.get(digest)
        if cached is not None and cached[1] > self.clock.now():
            # raises when the kid left the JWKS; another key under the kid: verified again
            if await self.keys.key_for(cached[2]) is cached[3]:
                identity: CallerIdentity = cached[0]
                return identity
        try:
            header = jwt.get_unverified_header(token)
        except jwt.PyJWTError as exc:
            raise UnauthenticatedError("malformed caller token") from exc
        kid = str(header.get("kid") or "")
        key = await self.keys.key_for(kid)
        try:
            claims = jwt.decode(
                token,
                key,
                algorithms=list(_JWT_ALGORITHMS),
                audience=self.audience,
                issuer=self.issuer,
                options={"require": ["exp"], "verify_iss": self.issuer is not None},
                leeway=JWT_LEEWAY_S,
            )
        except jwt.ExpiredSignatureError as exc:
            raise UnauthenticatedError("caller token expired") from exc
        except jwt.PyJWTError as exc:
            raise UnauthenticatedError(f"caller token rejected: {type(exc).__name__}") from exc
        name = claims.get(self.name_claim)
        if not isinstance(name, str) or not name:
            raise UnauthenticatedError(f"caller token has no '{self.name_claim}' claim")
        caller = CallerIdentity(name=name, authenticated=True)
        self._verified[digest] = (caller, float(claims["exp"]), kid, key)
        return caller

    def authenticate_now(self, authorization: str | None) -> CallerIdentity | None:
        """None: a token is checked against the JWKS's current key for its kid, which may
        need a fetch, so every JWT request awaits `authenticate`."""
        return None


def build_authenticator(settings: CallerSettings, clock: Clock) -> CallerAuthenticator:
    """The authenticator for the configured mode.

    Raises:
        CallerConfigError: the tokens file is unusable.
    """
    if settings.mode is CallerMode.TOKEN:
        assert settings.tokens_file is not None  # settings validated it
        return StaticTokenCallerAuth(StaticTokenCallerAuth.read_tokens(settings.tokens_file))
    if settings.mode is CallerMode.JWT:
        assert settings.jwks_url is not None
        assert settings.audience is not None
        return JwtCallerAuth(
            JwksKeys(
                settings.jwks_url,
                clock,
                ca_file=settings.ca_file,
                bearer_token_file=settings.bearer_token_file,
            ),
            clock,
            audience=settings.audience,
            issuer=settings.issuer,
            name_claim=settings.name_claim,
        )
    return NoCallerAuth()


def caller_secrets(settings: CallerSettings) -> list[str]:
    """The caller tokens configured, for registration with the log redactor."""
    if settings.mode is CallerMode.TOKEN and settings.tokens_file is not None:
        try:
            return list(StaticTokenCallerAuth.read_tokens(settings.tokens_file))
        except CallerConfigError:
            return []
    return []


def whoami(caller: CallerIdentity) -> dict[str, Any]:
    """The local answer to `/management/v1/whoami` (pylakekeeper reads `id`, then `name`)."""
    return {
        "id": caller.name,
        "name": caller.name,
        "user-type": "application",
        "email": None,
        "authenticated": caller.authenticated,
    }


__all__ = [
    "ANONYMOUS",
    "CallerAuthenticator",
    "CallerConfigError",
    "JwksKeys",
    "JwtCallerAuth",
    "NoCallerAuth",
    "StaticTokenCallerAuth",
    "bearer_value",
    "build_authenticator",
    "caller_secrets",
    "whoami",
]
