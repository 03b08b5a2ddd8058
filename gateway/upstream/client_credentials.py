"""OAuth2 client credentials: the session token the gateway logs in for (docs/contracts.md §3).

`client_secret_basic` / `client_secret_post`, `scope`, `audience`, `resource`. The token is
refreshed in the background at about 80% of its lifetime (±jitter), single-flight (one
`gateway.concurrency.SingleFlight`); while the IdP is down the source backs off and keeps
using the current token until it truly expires. A 401 from the catalog calls
`force_refresh(rejected)`, which refreshes once even if many requests saw the same 401.
"""

from __future__ import annotations

import asyncio
import base64
import json
import logging
import random
from collections.abc import Coroutine
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, urlencode, urlsplit

import jwt
from pydantic import ValidationError

from gateway.clock import Clock
from gateway.clock_skew import ClockSkew
from gateway.concurrency import SingleFlight, Spawn
from gateway.errors import GatewayError, IdentityProviderError
from gateway.metrics import Metrics
from gateway.secrets import Secret
from gateway.settings import AuthMethod, TokenSettings
from gateway.tuning import (
    TOKEN_DEFAULT_LIFETIME_S,
    TOKEN_EXPIRY_MARGIN_S,
    TOKEN_MIN_FORCED_INTERVAL_S,
    TOKEN_MIN_REFRESH_INTERVAL_S,
    TOKEN_REFRESH_JITTER,
)
from gateway.upstream.answers import parse_http_date
from gateway.upstream.transport import RawRequest, Transport
from gateway.upstream.wire import TokenResponse

log = logging.getLogger("gateway.upstream.token_source")  # the name operators filter on

_GRANT = "grant"  # the one single-flight key: there is one session token


def jwt_expiry_s(token: str) -> float | None:
    """The `exp` of a JWT (unverified: only to schedule refresh, never to trust it)."""
    try:
        claims = jwt.decode(token, options={"verify_signature": False})
    except jwt.PyJWTError:
        return None
    exp = claims.get("exp")
    return float(exp) if isinstance(exp, int | float) else None


@dataclass(frozen=True)
class _Grant:
    token: Secret
    expires_at_s: float  # wall clock: only for the expiry-timestamp metric
    issued_at_s: float
    fetched_mono: float
    lifetime_s: float

    @property
    def expires_mono(self) -> float:
        # Deadlines run on the monotonic clock so a wall-clock step can neither keep an expired
        # token in use nor discard a valid one.
        return self.fetched_mono + self.lifetime_s


class ClientCredentialsTokenSource:
    """OAuth2 client-credentials grant with background refresh (~80% of lifetime ± jitter)."""

    def __init__(
        self,
        settings: TokenSettings,
        transport: Transport,
        clock: Clock,
        metrics: Metrics,
        *,
        rng: random.Random | None = None,
        skew: ClockSkew | None = None,
    ) -> None:
        if not (settings.token_url and settings.client_id and settings.client_secret):
            raise ValueError("client credentials need token_url, client_id and client_secret")
        self._settings = settings
        self._token_url = settings.token_url
        self._client_id = settings.client_id
        self._secret = Secret(settings.client_secret.get_secret_value())
        self._transport = transport
        self._clock = clock
        self._metrics = metrics
        self._rng = rng or random.Random()  # noqa: S311 - jitter, not cryptography
        self._skew = skew  # told the IdP's Date: the third clock of the credential clock rule
        self._grant: _Grant | None = None
        self._refresh_at_mono = 0.0  # monotonic time of the next background refresh
        self._spawn: Spawn | None = None
        # The one token request in flight; before start() it runs as a plain task.
        self._flight: SingleFlight[str, _Grant] = SingleFlight(self._spawn_request)
        self._loop_task: asyncio.Task[None] | None = None
        self._failures = 0
        # After a failed grant nobody asks the IdP again before this (monotonic) time: callers
        # fail fast instead of turning the request rate into an IdP request rate.
        self._retry_at_mono = 0.0

    # -- public -------------------------------------------------------------
    def _usable(self, grant: _Grant | None) -> bool:
        return (grant is not None
                and self._clock.monotonic() < grant.expires_mono - TOKEN_EXPIRY_MARGIN_S)

    def ready(self) -> bool:
        return self._usable(self._grant)

    async def token(self) -> Secret | None:
        grant = self._grant
        if self._usable(grant):
            assert grant is not None
            return grant.token
        self._check_backoff()
        return (await self._refresh()).token

    def _check_backoff(self) -> None:
        wait = self._retry_at_mono - self._clock.monotonic()
        if wait > 0 and not self._flight.running(_GRANT):
            raise IdentityProviderError(
                f"the identity provider is unavailable; retrying in {wait:.0f}s"
            )

    async def force_refresh(self, rejected: Secret | None) -> Secret | None:
        grant = self._grant
        if grant is not None and rejected is not None and grant.token != rejected:
            return grant.token  # someone already replaced the rejected token
        if (
            grant is not None
            and self._clock.monotonic() - grant.fetched_mono < TOKEN_MIN_FORCED_INTERVAL_S
            and self._usable(grant)
        ):
            return grant.token  # fetched moments ago: a new one would be refused the same way
        if grant is not None and self._usable(grant) and (
            self._clock.monotonic() < self._retry_at_mono
        ):
            return grant.token  # the IdP is backing off: the current token is all there is
        self._check_backoff()
        return (await self._refresh()).token

    def start(self, spawn: Spawn) -> None:
        self._spawn = spawn
        if self._loop_task is None:
            self._loop_task = spawn(self._run())

    async def close(self) -> None:
        pending = {t for t in (self._loop_task, *self._flight.tasks()) if t is not None}
        for task in pending:
            if not task.done():
                task.cancel()
        if pending:
            await asyncio.wait(pending)
        self._loop_task = None

    # -- refresh ------------------------------------------------------------
    def _spawn_request(self, coro: Coroutine[Any, Any, Any]) -> asyncio.Task[Any]:
        return self._spawn(coro) if self._spawn is not None else asyncio.ensure_future(coro)

    async def _refresh(self) -> _Grant:
        """Join or start the one token request; leaving early never cancels it."""
        try:
            grant, _ = await self._flight.run(_GRANT, self._fetch,
                                              timeout_s=self._settings.timeout_s + 1.0)
        except TimeoutError as exc:
            raise IdentityProviderError("the identity provider did not answer in time") from exc
        return grant

    def _request(self) -> tuple[dict[str, str], bytes]:
        form = {"grant_type": "client_credentials"}
        for name in ("scope", "audience", "resource"):
            value = getattr(self._settings, name)
            if value:
                form[name] = value
        headers = {
            "Content-Type": "application/x-www-form-urlencoded",
            "Accept": "application/json",
        }
        if self._settings.auth_method is AuthMethod.CLIENT_SECRET_BASIC:
            # RFC 6749 §2.3.1: id and secret are form-urlencoded before base64.
            raw = f"{quote(self._client_id, safe='')}:{quote(self._secret.reveal(), safe='')}"
            headers["Authorization"] = "Basic " + base64.b64encode(raw.encode()).decode()
        else:
            form["client_id"] = self._client_id
            form["client_secret"] = self._secret.reveal()
        return headers, urlencode(form).encode()

    async def _fetch(self) -> _Grant:
        try:
            return await self._grant_request()
        except GatewayError:
            self._failures += 1
            self._retry_at_mono = self._clock.monotonic() + self._backoff_s()
            raise

    async def _grant_request(self) -> _Grant:
        headers, body = self._request()
        start = self._clock.monotonic()
        status = "error"
        host = urlsplit(self._token_url).netloc
        try:
            resp = await self._transport.send(RawRequest(
                "POST", self._token_url, self._settings.timeout_s, headers=headers, body=body
            ))
            status = str(resp.status)
            if self._skew is not None:
                self._skew.observe("idp", parse_http_date(resp.headers.get("date")), start)
            if resp.status != 200:
                raise IdentityProviderError(
                    f"the identity provider {host} refused the token request "
                    f"({resp.status}{_oauth_error(resp.body)})"
                )
            try:
                parsed = TokenResponse.model_validate_json(resp.body)
            except ValidationError:
                raise IdentityProviderError(
                    f"the identity provider {host} sent an unreadable token response"
                ) from None
        except IdentityProviderError:
            raise
        except GatewayError as exc:
            raise IdentityProviderError(
                f"the identity provider {host} is unreachable: {exc.message}"
            ) from exc
        finally:
            self._metrics.upstream_requests.labels(target="idp", op="token", status=status).inc()
            self._metrics.upstream_duration.labels(target="idp", op="token").observe(
                max(0.0, self._clock.monotonic() - start)
            )
        now = self._clock.now()
        lifetime = parsed.expires_in
        if lifetime is None or lifetime <= 0:
            exp = jwt_expiry_s(parsed.access_token)
            lifetime = (exp - now) if exp is not None else TOKEN_DEFAULT_LIFETIME_S
        if lifetime < TOKEN_MIN_REFRESH_INTERVAL_S:
            # Already expired (or nearly) on arrival: a skewed IdP or local clock. Asking again
            # at once would spin; the catalog judges the token, a 401 forces one refresh.
            self._metrics.idp_token_expired_on_arrival.inc()
            log.warning("the identity provider sent a token with %.0f s left; using it for %.0f s "
                        "before asking again (check the clocks of this host and the IdP)",
                        lifetime, TOKEN_MIN_REFRESH_INTERVAL_S,
                        extra={"lifetime_s": round(lifetime, 1)})
            lifetime = TOKEN_MIN_REFRESH_INTERVAL_S
        # Counted from when the request left: the token was issued after that, never before.
        grant = _Grant(token=Secret(parsed.access_token), expires_at_s=now + lifetime,
                       issued_at_s=now, fetched_mono=start, lifetime_s=lifetime)
        self._grant = grant
        self._refresh_at_mono = max(
            grant.fetched_mono + TOKEN_MIN_REFRESH_INTERVAL_S,
            refresh_point_s(grant.fetched_mono, grant.lifetime_s,
                            self._settings.refresh_fraction, TOKEN_REFRESH_JITTER,
                            self._rng.random()),
        )
        self._failures = 0
        self._metrics.idp_token_expiry.set(grant.expires_at_s)
        return grant

    def _backoff_s(self) -> float:
        cap = min(self._settings.backoff_max_s, 1.0 * (2.0 ** min(self._failures, 16)))
        delay = max(0.5, self._rng.random() * cap)
        grant = self._grant
        if grant is not None:
            # Retry again before the current token dies if there is still time to.
            left = grant.expires_mono - self._clock.monotonic()
            if left > 1.0:
                delay = min(delay, left / 2)
        return delay

    async def _run(self) -> None:
        while True:
            try:
                if self._grant is not None:
                    wait = self._refresh_at_mono - self._clock.monotonic()
                    if wait > 0:
                        await self._clock.sleep(wait)
                        continue  # re-check: a forced refresh may have moved the point
                await self._refresh()
            except GatewayError as err:
                log.warning(
                    "identity provider token refresh failed; keeping the current token",
                    extra={"error_type": err.type_name, "failures": self._failures,
                           "token_usable": self.ready()},
                )
                await self._clock.sleep(max(0.5, self._retry_at_mono - self._clock.monotonic()))
            except Exception:
                log.exception("token refresh loop iteration failed")
                await self._clock.sleep(self._backoff_s())


def refresh_point_s(issued_at_s: float, lifetime_s: float, fraction: float, jitter: float,
                    rand: float) -> float:
    """When to refresh a token: `fraction` of its lifetime ± `jitter`, `rand` in [0, 1).

    Jitter keeps a fleet of gateways started together from asking the IdP together.
    """
    return issued_at_s + lifetime_s * (fraction + jitter * (2.0 * rand - 1.0))


def _oauth_error(body: bytes) -> str:
    # The OAuth `error` code (e.g. invalid_client) is safe and helps; descriptions may not be.
    try:
        data = json.loads(body)
    except (ValueError, UnicodeDecodeError):
        return ""
    code = data.get("error") if isinstance(data, dict) else None
    if isinstance(code, str) and code.replace("_", "").isalnum() and len(code) < 64:
        return f" {code}"
    return ""
