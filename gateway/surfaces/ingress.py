"""The gate every surface request passes: anti-SSRF, caller authentication, rate limit, policy.

Order matters: forgeable requests are refused before any work (no token verification for a
browser's cross-site request), a credential that keeps failing before it is verified again
(surfaces/peers.py; a peer's failures never refuse a token that verifies), authentication
before the rate limit (the bucket is per caller, or per peer for an anonymous caller), and the
policy check before the cache is consulted (callers share cache entries).
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from cachetools import LRUCache
from multidict import istr

from gateway.audit import DENIED, credential_event, folded_scope, note_table
from gateway.clock import Clock
from gateway.concurrency import TokenBucket
from gateway.errors import (
    CallerAuthUnavailableError,
    GatewayError,
    PermissionDeniedError,
    RateLimitedCallerError,
)
from gateway.metrics import Metrics
from gateway.models import AccessMode, CallerIdentity, RequestContext, Scope, Warehouse
from gateway.names import is_uuid
from gateway.surfaces.callers import CallerAuthenticator, bearer_value
from gateway.surfaces.hosts import HostAllowList, well_formed
from gateway.surfaces.memo import BoundedLru
from gateway.surfaces.operations import Operations
from gateway.surfaces.peers import AuthFailures, Peer, credential_key
from gateway.surfaces.policy import CallerPolicy
from gateway.tuning import DECISION_MEMO_SIZE

MARKER_HEADER = "X-Lakegate-Request"
# The header names read on every request, as `istr`: a case-insensitive lookup with a plain str
# folds the name each time (~40 ns), an istr carries its folded form (aiohttp's hdrs do the
# same). An istr is a str, so plain mappings are read alike.
_HOST, _FORWARDED_FOR, _FETCH_SITE, _ORIGIN, _AUTHORIZATION, _MARKER = map(istr, (
    "Host", "X-Forwarded-For", "Sec-Fetch-Site", "Origin", "Authorization", MARKER_HEADER))
# Lakekeeper's default project (LAKEKEEPER__ENABLE_DEFAULT_PROJECT, on by default): the project
# of a request that names none, and the one a gateway without UPSTREAM__PROJECT_ID serves.
DEFAULT_PROJECT = "00000000-0000-0000-0000-000000000000"
_NO_SCOPE: Scope = ("", (), None)
_ALLOW, _DENY, _RESOLVE = "allow", "deny", "resolve"
DecisionKey = tuple[str, str, tuple[str, ...], str | None, AccessMode, str | None]
_log = logging.getLogger("lakegate.ingress")


def same_project(a: str, b: str) -> bool:
    """Whether two project ids name one project (UUIDs compared as UUIDs)."""
    if a == b:
        return True
    try:
        return uuid.UUID(a) == uuid.UUID(b)
    except ValueError:
        return False


def _scope_or_none(where: Callable[[], Scope | None] | None) -> Scope | None:
    """The surface's scope of a refused request, None when it has none or cannot parse it."""
    if where is None:
        return None
    try:
        return where()
    except GatewayError:
        return None


def forgeable(message: str) -> PermissionDeniedError:
    return PermissionDeniedError(message, lakekeeper_type="ForgeableRequest")


_LOOPBACK_ONLY = HostAllowList()


def check_not_forged(headers: Mapping[str, str], *, require_marker: bool,
                     hosts: HostAllowList = _LOOPBACK_ONLY,
                     uds: Callable[[], bool] | None = None) -> None:
    """Refuse what a browser or an SSRF could send (like Vault's X-Vault-Request).

    Why: deploy/README.md, "Security model".

    Args:
        headers: the request headers (case-insensitive mapping).
        require_marker: credential/metadata routes need Authorization or X-Lakegate-Request.
        hosts: the Host names accepted (DNS rebinding: gateway/surfaces/hosts.py).
        uds: whether the request came over the Unix socket (asked only for a Host `hosts`
            refuses): there any well-formed Host is accepted.

    Raises:
        PermissionDeniedError: type ForgeableRequest.
    """
    host = headers.get(_HOST)
    if not hosts.allows(host) and not (uds is not None and well_formed(host) and uds()):
        raise forgeable("the Host header must name loopback (127.0.0.1, [::1], localhost) or a "
                        "name in LAKEGATE__LISTEN__ALLOWED_HOSTS")
    if _FORWARDED_FOR in headers:
        raise forgeable("requests relayed by a proxy (X-Forwarded-For) are refused")
    fetch_site = headers.get(_FETCH_SITE)
    if fetch_site is not None and fetch_site.lower() != "none":
        # Only `none` (typed in the address bar) is not a page's request: `same-origin` is what a
        # rebound page's own requests say.
        raise forgeable("browser requests from a page (Sec-Fetch-Site) are refused")
    origin = headers.get(_ORIGIN)
    if origin is not None:
        raise forgeable("browser requests (Origin) are refused")
    if require_marker and not headers.get(_AUTHORIZATION) and not headers.get(_MARKER):
        raise forgeable(
            "no Authorization header and no anti-forgery header: send any bearer token"
            f" (a real one if the gateway checks tokens) or the header '{MARKER_HEADER}: 1'"
        )


class RateLimiter:
    """Per-caller token bucket; refusal carries the seconds until a token is available."""

    def __init__(self, rate_per_s: float, burst: int, clock: Clock, max_callers: int = 10_000):
        self._rate = rate_per_s
        self._burst = float(burst)
        self._clock = clock
        self._buckets: LRUCache[str, TokenBucket] = LRUCache(max_callers)

    def acquire(self, caller: str) -> None:
        """Take one token for `caller`.

        Raises:
            RateLimitedCallerError: the bucket is empty (retry_after_s set).
        """
        bucket = self._buckets.get(caller)
        if bucket is None:
            bucket = self._buckets[caller] = TokenBucket(self._rate, self._clock, self._burst)
        if not bucket.try_acquire():
            raise RateLimitedCallerError("caller rate limit exceeded",
                                         retry_after_s=bucket.wait_s())


@dataclass(eq=False, repr=False)
class Gate:
    """Admission and authorization shared by the HTTP and gRPC surfaces."""

    auth: CallerAuthenticator
    policy: CallerPolicy
    limiter: RateLimiter | None
    ops: Operations
    metrics: Metrics
    # CALLERS__ALLOW_PROJECT_HEADER: whether a request may name a project other than the
    # default one (then the policy must grant it); false: the gateway serves one project.
    allow_project_header: bool = False
    hosts: HostAllowList = field(default_factory=HostAllowList)
    failures: AuthFailures | None = None
    # The policy is fixed between reloads, so the part of a decision that depends only on the
    # request (not on the warehouse's resolved names) is a pure function: memoized.
    _decisions: BoundedLru[DecisionKey, str] = field(
        init=False, default_factory=lambda: BoundedLru(DECISION_MEMO_SIZE))
    _rejected: dict[str, Any] = field(init=False, default_factory=dict)  # label children

    def replace(self, auth: CallerAuthenticator, policy: CallerPolicy) -> None:
        """Swap in a reloaded authenticator and policy (SIGHUP); memoized decisions go too."""
        self._decisions = BoundedLru(DECISION_MEMO_SIZE)
        self.auth, self.policy = auth, policy
        if self.failures is not None:
            self.failures.forget_credentials()  # a token failing before may be valid now

    def _reject(self, reason: str, err: GatewayError, *, caller: str | None = None,
                project: str | None = None, scope: Scope | None = None) -> GatewayError:
        child = self._rejected.get(reason)
        if child is None:
            child = self._rejected[reason] = self.metrics.ingress_rejected.labels(reason)
        child.inc()
        extra: dict[str, Any] = {"reason": reason, "type": err.type_name}
        if caller is not None:
            extra["caller"] = caller
        if project is not None:
            extra["project"] = project
        if scope is not None:
            extra.update(folded_scope(scope))
        _log.info("request refused", extra=extra)
        return err

    def admit_now(
        self,
        authorization: str | None,
        headers: Mapping[str, str] | None = None,
        *,
        require_marker: bool = True,
        peer: Callable[[], Peer] | None = None,
        uds: Callable[[], bool] | None = None,
    ) -> CallerIdentity | None:
        """`admit` without a coroutine when the caller is known at once (mode none, a known
        static token) and nothing failed lately, else None: await `admit`.

        The same checks in the same order: the anti-SSRF headers (refused here as there),
        then the caller, then the rate limit.
        """
        if headers is not None:
            try:  # _check_headers, inline: this runs once per request
                check_not_forged(headers, require_marker=require_marker, hosts=self.hosts,
                                 uds=uds)
            except PermissionDeniedError as exc:
                raise self._reject("ssrf_header", exc) from None
        failures = self.failures
        if failures is not None and failures.active:
            return None
        caller = self.auth.authenticate_now(authorization)
        if caller is not None and self.limiter is not None:
            self._take_token(caller, peer)
        return caller

    def _check_headers(self, headers: Mapping[str, str], require_marker: bool,
                       uds: Callable[[], bool] | None) -> None:
        try:
            check_not_forged(headers, require_marker=require_marker, hosts=self.hosts, uds=uds)
        except PermissionDeniedError as exc:
            raise self._reject("ssrf_header", exc) from None

    def _take_token(self, caller: CallerIdentity, peer: Callable[[], Peer] | None) -> None:
        assert self.limiter is not None
        # An anonymous caller (mode none) is its peer: one process cannot starve the rest.
        key = caller.name if caller.authenticated or peer is None else (
            f"{caller.name}@{peer().caller_key}")
        try:
            self.limiter.acquire(key)
        except RateLimitedCallerError as exc:
            raise self._reject("ratelimit", exc) from None

    async def admit(
        self,
        authorization: str | None,
        headers: Mapping[str, str] | None = None,
        *,
        require_marker: bool = True,
        peer: Callable[[], Peer] | None = None,
        uds: Callable[[], bool] | None = None,
    ) -> CallerIdentity:
        """Check a request's origin, authenticate its caller and take a rate-limit token.

        Args:
            authorization: the Authorization header / `authorization` metadata value.
            headers: HTTP headers (None on gRPC, which a browser cannot send).
            require_marker: whether the anti-SSRF marker rule applies to this route.
            peer: the connection's peer, looked up only when a limit needs it.
            uds: whether the connection is a Unix socket (the Host rule is for TCP only).
        """
        if headers is not None:
            self._check_headers(headers, require_marker, uds)
        failures = self.failures
        if failures is not None and failures.active:
            caller = await self._authenticate_limited(failures, authorization, peer)
        else:  # the steady state: nothing failed lately, no key to compute
            try:
                caller = await self.auth.authenticate(authorization)
            except CallerAuthUnavailableError as exc:
                raise self._reject("auth", exc) from None  # not the credential's failure
            except GatewayError as exc:
                if failures is not None:
                    token = bearer_value(authorization)
                    failures.failed(None if token is None else credential_key(token),
                                    peer().auth_key if peer is not None else None)
                raise self._reject("auth", exc) from None
        if self.limiter is not None:
            self._take_token(caller, peer)
        return caller

    async def _authenticate_limited(self, failures: AuthFailures, authorization: str | None,
                                    peer: Callable[[], Peer] | None) -> CallerIdentity:
        """Authenticate under the failure limits (surfaces/peers.py): a credential that keeps
        failing is refused before it is verified again; a peer that keeps failing gets 429
        for its failures, never for a token that verifies."""
        token = bearer_value(authorization)
        credential = None if token is None else credential_key(token)
        if credential is not None:
            try:
                failures.check_credential(credential)
            except RateLimitedCallerError as exc:
                await failures.hold(exc.retry_after_s or 0.0)
                raise self._reject("auth_ratelimit", exc) from None
        peer_key = peer().auth_key if peer is not None else None
        peer_wait = 0.0 if peer_key is None else failures.peer_wait_s(peer_key)
        try:
            return await self.auth.authenticate(authorization)
        except CallerAuthUnavailableError as exc:
            raise self._reject("auth", exc) from None  # not the credential's failure
        except GatewayError as exc:
            failures.failed(credential, peer_key)
            if peer_wait > 0:
                await failures.hold(peer_wait)
                raise self._reject("auth_ratelimit", RateLimitedCallerError(
                    "too many failed authentications from this peer",
                    retry_after_s=peer_wait)) from None
            raise self._reject("auth", exc) from None

    def served_project(self, project: str) -> bool:
        """Whether `project` (a header's value) names the project this gateway serves: the
        configured `UPSTREAM__PROJECT_ID`, or when unset the catalog's default project, which
        Lakekeeper names with the NIL UUID (pylakekeeper's own tests send it). UUIDs compare
        as UUIDs (any case)."""
        return same_project(project, self.policy.default_project or DEFAULT_PROJECT)

    def check_project(self, caller: CallerIdentity, ctx: RequestContext,
                      where: Callable[[], Scope | None] | None = None) -> RequestContext:
        """Refuse a request naming a project the gateway does not serve to this caller; the
        context to use from here on (a header naming the served project is dropped: one
        project, one policy decision and one cache entry, whatever the spelling).

        The project header goes upstream, so without this a caller limited to `demo/team_a*`
        would reach another project's `demo/team_a` tables (issue #28). Call it for every
        request whose context names a project, before any route works.

        Args:
            where: the table (or namespace) the request names, when the surface can tell; the
                refusal's audit line and log line name it.

        Raises:
            PermissionDeniedError: another project than the served one while
                `allow_project_header` is off, or one the caller's policy grants nothing in.
        """
        project = ctx.project_id
        if project is None:
            return ctx
        if self.served_project(project):
            return ctx._replace(project_id=None)
        if not self.allow_project_header:
            err = PermissionDeniedError(
                "this gateway serves one project: send no project header or the configured "
                "one", lakekeeper_type="ProjectNotAllowed")
        elif not self.policy.allows_project(caller, project):
            err = PermissionDeniedError(
                f"caller '{caller.name}' has no grant in the requested project",
                lakekeeper_type="ProjectNotAllowed")
        else:
            return ctx
        scope = _scope_or_none(where)
        credential_event(ctx, caller, scope or _NO_SCOPE, None, err.type_name)
        raise self._reject("project", err, caller=caller.name, project=project, scope=scope)

    def authorize_now(
        self, caller: CallerIdentity, ctx: RequestContext, scope: Scope, access: AccessMode
    ) -> bool:
        """True when the policy allows it without awaiting (no policy, or a remembered
        allow that needs no warehouse names), the table noted as `authorize` notes it; False:
        await `authorize`, which decides (and refuses) as always."""
        policy = self.policy
        if policy.enabled:
            dk: DecisionKey = (caller.name, scope[0], scope[1], scope[2], access,
                               ctx.project_id)
            if self._decisions.get(dk) is not _ALLOW:
                return False
        note_table(ctx, caller, scope, access)  # audited with the answer (audit.TableNotes)
        return True

    async def authorize(
        self, caller: CallerIdentity, ctx: RequestContext, scope: Scope, access: AccessMode
    ) -> None:
        """Apply the caller policy; resolves the warehouse only when a rule needs its names.

        Raises:
            PermissionDeniedError: the caller may not use `access` on the table.
        """
        note_table(ctx, caller, scope, access)  # audited with the answer (audit.TableNotes)
        if not self.policy.enabled or await self.allowed(caller, ctx, scope, access):
            return  # (no policy: no `allowed` coroutine on the hot path)
        credential_event(ctx, caller, scope, access, DENIED)
        raise self._reject(
            "policy",
            PermissionDeniedError(f"caller '{caller.name}' may not {access.value} this table"),
        )

    async def allowed(
        self, caller: CallerIdentity, ctx: RequestContext, scope: Scope, access: AccessMode
    ) -> bool:
        """Whether the policy allows it (no metric; used to pick read vs write vending)."""
        policy = self.policy
        if not policy.enabled:
            return True
        warehouse, namespace, table = scope
        project = ctx.project_id
        dk: DecisionKey = (caller.name, warehouse, namespace, table, access, project)
        decision = self._decisions.get(dk)
        if decision is None:
            if policy.allows(caller, (warehouse,), namespace, table, access, project):
                decision = _ALLOW
            elif not policy.needs_warehouse_names(caller, warehouse):
                decision = _DENY
            else:
                decision = _RESOLVE
            self._decisions.put(dk, decision)
        if decision is not _RESOLVE:
            return decision is _ALLOW
        # Depends on the warehouse's names, whose resolution may change: decided every time.
        wh = await self.ops.resolve_warehouse(warehouse, ctx)
        return policy.allows(caller, (warehouse, wh.id, wh.name), namespace, table, access,
                             project)

    async def authorize_warehouse(self, caller: CallerIdentity, ctx: RequestContext,
                                  warehouse: str) -> Warehouse:
        """The warehouse, resolved, if the caller holds a grant in it (warehouse look-ups).

        A name no rule covers is refused before it is resolved (an unknown and a forbidden
        name answer alike); a UUID is decided on through the name it resolves to.

        Raises:
            PermissionDeniedError: the caller holds nothing in that warehouse.
            NotFoundError: unknown warehouse (a UUID, or a name the caller may use).
        """
        policy = self.policy
        project = ctx.project_id
        if policy.enabled and not is_uuid(warehouse) and not policy.allows_warehouse(
                caller, (warehouse,), project):
            raise self._warehouse_denied(caller)
        wh = await self.ops.resolve_warehouse(warehouse, ctx)
        if policy.enabled and not policy.allows_warehouse(caller, (warehouse, wh.name), project):
            raise self._warehouse_denied(caller)
        return wh

    def _warehouse_denied(self, caller: CallerIdentity) -> GatewayError:
        return self._reject("policy", PermissionDeniedError(
            f"caller '{caller.name}' holds no grant in this warehouse"))

    def authorize_global(self, caller: CallerIdentity) -> None:
        """Only a caller with a global write grant may invalidate the whole cache."""
        if not self.policy.allows_everything(caller, AccessMode.WRITE):
            raise self._reject(
                "policy", PermissionDeniedError(f"caller '{caller.name}' may not invalidate all")
            )
