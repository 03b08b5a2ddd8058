"""CatalogClient: the Lakekeeper REST calls the gateway makes, as typed methods.

Every call goes through one runner (`_call`): session token, request headers
(`x-request-id`, `x-project-id`, `Idempotency-Key`), per-attempt timeout under an overall
deadline, full-jitter retries of retryable errors honouring `Retry-After`, one forced token
refresh and one retry on a 401, and one table mapping status + envelope to typed errors.

A `Retry-After` from the catalog is shared by every call of this client: until it has
passed, no call is sent (one shared wait, no extra upstream calls during it).
"""

from __future__ import annotations

import asyncio
import json
import random
import uuid
from collections.abc import Awaitable, Mapping
from dataclasses import KW_ONLY, dataclass, field
from typing import Any
from urllib.parse import quote, urlencode

from gateway.clock import Clock
from gateway.clock_skew import ClockSkew
from gateway.errors import (
    GatewayError,
    InvalidRequestError,
    ProtocolViolationError,
    RateLimitedError,
    UnavailableError,
    UpstreamAuthError,
    UpstreamTimeoutError,
)
from gateway.metrics import Metrics
from gateway.models import (
    AccessMode,
    CacheKey,
    CreateTableSpec,
    GenericTable,
    ListResult,
    RequestContext,
    StorageCredential,
    TableIdentifier,
    UpstreamResponse,
    join_namespace,
)
from gateway.secrets import Secret
from gateway.settings import UpstreamSettings
from gateway.tuning import UPSTREAM_HEALTH_TIMEOUT_S, UPSTREAM_MAX_HEADER_VALUE
from gateway.upstream.answers import map_error, parse_answer, parse_http_date, table_of
from gateway.upstream.retry import RetryPolicy, run_with_retry
from gateway.upstream.token_source import TokenSource
from gateway.upstream.transport import RawRequest, RawResponse, Transport
from gateway.upstream.wire import (
    CatalogConfig,
    ListGenericTablesResponse,
    LoadCredentialsResponse,
    LoadGenericTableResponse,
    RenameRequest,
    WireIdent,
)

_SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})


def _header_safe(value: str) -> bool:
    return 0 < len(value) <= UPSTREAM_MAX_HEADER_VALUE and all(33 <= ord(c) <= 126 for c in value)


def _checked_header(name: str, value: str) -> str:
    """Caller-supplied header values go upstream only as plain visible-ASCII tokens."""
    if not _header_safe(value):
        raise InvalidRequestError(f"invalid {name} header")
    return value


def _seg(value: str) -> str:
    return quote(value, safe="")


async def _within(call: Awaitable[Secret | None], remaining_s: float) -> Secret | None:
    """The session token, or UpstreamTimeoutError once the call's deadline passes: a slow IdP
    must not keep a catalog call past its deadline (the token request itself goes on)."""
    try:
        async with asyncio.timeout(max(0.001, remaining_s)):
            return await call
    except TimeoutError:
        raise UpstreamTimeoutError(
            "no session token within the upstream deadline (the identity provider is slow)"
        ) from None


def ns_segment(namespace: tuple[str, ...]) -> str:
    """Namespace levels → the `%1F`-joined, percent-encoded path segment."""
    return _seg(join_namespace(namespace))


@dataclass(eq=False, repr=False)
class CatalogClient:
    """Typed Lakekeeper calls over an injected Transport and TokenSource.

    Args:
        transport: sends the HTTP requests.
        tokens: the session token.
        settings: base URL, project, roles, timeouts, retries.
        metrics: upstream request counters/latency (per attempt).
        clock: time source.
        rng: jitter source (not cryptography).
        skew: told the `Date` of every answer (the catalog's clock, for the skew gauge).
    """

    transport: Transport
    tokens: TokenSource
    settings: UpstreamSettings
    metrics: Metrics
    clock: Clock
    _: KW_ONLY
    rng: random.Random = field(default_factory=random.Random)
    skew: ClockSkew | None = None
    _base: str = field(init=False)
    _policy: RetryPolicy = field(init=False)
    # The catalog's last `Retry-After`, shared by every call: nothing is sent before it.
    _not_before_mono: float = field(default=0.0, init=False)

    def __post_init__(self) -> None:
        self._base = self.settings.base_url
        self._policy = RetryPolicy(
            max_retries=self.settings.max_retries, base_s=self.settings.backoff_base_s,
            cap_s=self.settings.backoff_max_s, deadline_s=self.settings.deadline_s,
        )

    # ------------------------------------------------------------------ runner
    def _headers(self, ctx: RequestContext, token: Secret | None,
                 extra: Mapping[str, str] | None, idem: str | None) -> dict[str, str]:
        # A caller-chosen request id that is not a plain token is replaced, never forwarded.
        rid = ctx.request_id if _header_safe(ctx.request_id) else str(uuid.uuid4())
        headers = {"Accept": "application/json", "x-request-id": rid}
        project = ctx.project_id or self.settings.project_id
        if project:
            headers["x-project-id"] = _checked_header("x-project-id", project)
        if idem:
            headers["Idempotency-Key"] = _checked_header("Idempotency-Key", idem)
        if token is not None:
            headers["Authorization"] = f"Bearer {token.reveal()}"
        if extra:
            headers.update(extra)
        return headers

    async def _send(self, op: str, method: str, url: str, headers: dict[str, str],
                    body: bytes | None, timeout_s: float) -> RawResponse:
        start = self.clock.monotonic()
        status = "error"
        try:
            resp = await self.transport.send(
                RawRequest(method, url, timeout_s, headers=headers, body=body)
            )
            status = str(resp.status)
            if self.skew is not None:
                self.skew.observe("catalog", parse_http_date(resp.headers.get("date")), start)
            return resp
        except UpstreamTimeoutError:
            status = "timeout"
            raise
        finally:
            self.metrics.upstream_requests.labels(target="catalog", op=op, status=status).inc()
            self.metrics.upstream_duration.labels(target="catalog", op=op).observe(
                max(0.0, self.clock.monotonic() - start)
            )

    def _timeout(self, end_mono: float) -> float:
        """One request's timeout, computed as it is sent (after the session token was
        awaited): never past the call's deadline `end_mono`.

        Raises:
            UpstreamTimeoutError: the deadline passed while the token was awaited.
        """
        left = end_mono - self.clock.monotonic()
        if left <= 0:
            raise UpstreamTimeoutError("the upstream deadline passed")
        return min(self.settings.timeout_s, left)

    async def _call(
        self,
        op: str,
        method: str,
        path: str,
        ctx: RequestContext,
        *,
        query: Mapping[str, str] | None = None,
        body: bytes | None = None,
        headers: Mapping[str, str] | None = None,
        mutation: bool = False,
        raw: bool = False,
    ) -> RawResponse:
        """Send one logical call with retries; return the success (or, if `raw`, any) answer."""
        url = self._base + path + (("?" + urlencode(query)) if query else "")
        # Retrying a mutation is only safe when Lakekeeper can de-duplicate it.
        idem = ctx.idempotency_key or (str(uuid.uuid4()) if mutation else None)
        extra = dict(headers or {})
        if body is not None:
            extra.setdefault("Content-Type", "application/json")

        async def attempt(n: int, remaining_s: float) -> RawResponse:
            gap = self._not_before_mono - self.clock.monotonic()
            if gap > 0:
                if gap >= remaining_s:
                    raise RateLimitedError("the catalog asked to wait longer than the deadline",
                                           retry_after_s=gap)
                await self.clock.sleep(gap)
                remaining_s -= gap
            end_mono = self.clock.monotonic() + remaining_s
            token = await _within(self.tokens.token(), remaining_s)
            resp = await self._send(op, method, url, self._headers(ctx, token, extra, idem),
                                    body, self._timeout(end_mono))
            if resp.status == 401 and token is not None:
                fresh = await _within(self.tokens.force_refresh(token),
                                      end_mono - self.clock.monotonic())
                if fresh is not None and fresh != token:
                    resp = await self._send(op, method, url,
                                            self._headers(ctx, fresh, extra, idem), body,
                                            self._timeout(end_mono))
            if resp.status < 400 or (raw and resp.status not in (429, 503, 412)
                                     and resp.status < 500):
                return resp
            err = map_error(resp, op, self.clock.now())
            if err.retry_after_s and isinstance(err, RateLimitedError | UnavailableError):
                self._not_before_mono = max(self._not_before_mono,
                                            self.clock.monotonic() + err.retry_after_s)
            if raw and not err.retryable and not isinstance(err, UpstreamAuthError):
                return resp
            raise err

        try:
            return await run_with_retry(attempt, self._policy, self.clock, self.rng)
        except UpstreamAuthError:
            raise UpstreamAuthError("the catalog refused the gateway's session token") from None

    # ------------------------------------------------------------------ calls
    async def config(self, warehouse: str, ctx: RequestContext) -> dict[str, Any]:
        """`GET /catalog/v1/config?warehouse=` as JSON."""
        resp = await self._call("config", "GET", "/catalog/v1/config", ctx,
                                query={"warehouse": warehouse})
        try:
            data = json.loads(resp.body)
        except ValueError:
            data = None
        if not isinstance(data, dict):
            raise ProtocolViolationError("the catalog sent an unreadable config")
        return data

    async def resolve_warehouse_id(self, warehouse: str, ctx: RequestContext) -> str:
        """Warehouse name → UUID (the `{prefix}`), from `/catalog/v1/config`."""
        cfg = CatalogConfig.model_validate(await self.config(warehouse, ctx))
        prefix = cfg.prefix()
        if prefix is None:
            raise ProtocolViolationError("the catalog config has no prefix")
        return prefix

    async def load_credentials(self, key: CacheKey, ctx: RequestContext) -> tuple[
        StorageCredential, ...
    ]:
        """`GET .../generic-tables/{t}/credentials` for the key's access mode (see
        `load_credentials_dated`)."""
        creds, _ = await self.load_credentials_dated(key, ctx)
        return creds

    async def load_credentials_dated(self, key: CacheKey, ctx: RequestContext) -> tuple[
        tuple[StorageCredential, ...], float | None
    ]:
        """`GET .../generic-tables/{t}/credentials`, with the answer's `Date` (epoch s or None).

        The Date lets the cache measure a credential's lifetime on the catalog's clock
        instead of the local wall clock alone.

        The read/write role (when configured) goes in `x-assume-role`, so a read caller gets
        a read-only credential. Expiries are parsed by the cache, not here.
        """
        ns, table = key.namespace, key.table  # the folded form the policy decided on
        path = (f"/lakekeeper/v1/{_seg(key.warehouse_id)}/namespaces/{ns_segment(ns)}"
                f"/generic-tables/{_seg(table)}/credentials")
        if key.kind == "iceberg":  # Iceberg REST `loadCredentials`, same answer shape
            path = (f"/catalog/v1/{_seg(key.warehouse_id)}/namespaces/{ns_segment(ns)}"
                    f"/tables/{_seg(table)}/credentials")
        headers = {"X-Iceberg-Access-Delegation":
                   "vended-credentials" if key.delegation == "vended" else key.delegation}
        role = (self.settings.write_role_id if key.access is AccessMode.WRITE
                else self.settings.read_role_id)
        if role:
            headers["x-assume-role"] = role
        ctx = RequestContext(request_id=ctx.request_id, project_id=key.project or None)
        resp = await self._call("load_credentials", "GET", path, ctx, headers=headers)
        parsed: LoadCredentialsResponse = parse_answer(LoadCredentialsResponse, resp,
                                                 "load_credentials")
        creds = tuple(StorageCredential(prefix=c.prefix, config=c.config)
                      for c in parsed.storage_credentials)
        return creds, parse_http_date(resp.headers.get("date"))

    async def load_table(self, warehouse_id: str, namespace: tuple[str, ...], table: str,
                         ctx: RequestContext) -> GenericTable:
        """Table metadata only (`client-managed`: no credentials are vended for it)."""
        path = (f"/lakekeeper/v1/{_seg(warehouse_id)}/namespaces/{ns_segment(namespace)}"
                f"/generic-tables/{_seg(table)}")
        resp = await self._call("load_table", "GET", path, ctx,
                                headers={"X-Iceberg-Access-Delegation": "client-managed"})
        parsed: LoadGenericTableResponse = parse_answer(LoadGenericTableResponse, resp,
                                                        "load_table")
        return table_of(parsed.table)

    async def list_tables(self, warehouse_id: str, namespace: tuple[str, ...],
                          ctx: RequestContext, *, page_token: str | None = None,
                          page_size: int | None = None) -> ListResult:
        """One page of generic tables (`pageToken`/`pageSize` camelCase, as Lakekeeper)."""
        path = (f"/lakekeeper/v1/{_seg(warehouse_id)}/namespaces/{ns_segment(namespace)}"
                "/generic-tables")
        query: dict[str, str] = {}
        if page_token:
            query["pageToken"] = page_token
        if page_size is not None:
            query["pageSize"] = str(page_size)
        resp = await self._call("list_tables", "GET", path, ctx, query=query or None)
        parsed: ListGenericTablesResponse = parse_answer(ListGenericTablesResponse, resp,
                                                   "list_tables")
        return ListResult(
            identifiers=tuple(TableIdentifier(namespace=tuple(i.namespace), name=i.name,
                                              format=i.format, id=i.id)
                              for i in parsed.identifiers),
            next_page_token=parsed.next_page_token,
        )

    async def create_table(self, warehouse_id: str, namespace: tuple[str, ...],
                           spec: CreateTableSpec, ctx: RequestContext) -> GenericTable:
        """Create a generic table (Idempotency-Key generated when the caller sent none)."""
        path = (f"/lakekeeper/v1/{_seg(warehouse_id)}/namespaces/{ns_segment(namespace)}"
                "/generic-tables")
        body: dict[str, Any] = {k: v for k, v in spec.extra.items()
                                if k not in {"name", "format", "base-location", "doc",
                                             "properties"}}
        body.update({"name": spec.name, "format": spec.format})
        if spec.base_location is not None:
            body["base-location"] = spec.base_location
        if spec.doc is not None:
            body["doc"] = spec.doc
        if spec.properties is not None:
            body["properties"] = dict(spec.properties)
        resp = await self._call("create_table", "POST", path, ctx,
                                body=json.dumps(body).encode(), mutation=True)
        parsed: LoadGenericTableResponse = parse_answer(LoadGenericTableResponse, resp,
                                                  "create_table")
        return table_of(parsed.table)

    async def drop_table(self, warehouse_id: str, namespace: tuple[str, ...], table: str,
                         ctx: RequestContext, *, purge: bool | None = None,
                         force: bool = False) -> None:
        """Drop a generic table (`purgeRequested` defaults to true upstream: pass it)."""
        path = (f"/lakekeeper/v1/{_seg(warehouse_id)}/namespaces/{ns_segment(namespace)}"
                f"/generic-tables/{_seg(table)}")
        query: dict[str, str] = {}
        if purge is not None:
            query["purgeRequested"] = "true" if purge else "false"
        if force:
            query["force"] = "true"
        await self._call("drop_table", "DELETE", path, ctx, query=query or None,
                         mutation=True)

    async def rename_table(self, warehouse_id: str, source: tuple[tuple[str, ...], str],
                           destination: tuple[tuple[str, ...], str],
                           ctx: RequestContext) -> None:
        """Rename/move a generic table."""
        req = RenameRequest(
            source=WireIdent(namespace=list(source[0]), name=source[1]),
            destination=WireIdent(namespace=list(destination[0]), name=destination[1]),
        )
        await self._call("rename_table", "POST",
                         f"/lakekeeper/v1/{_seg(warehouse_id)}/generic-tables/rename", ctx,
                         body=json.dumps(req.dump()).encode(), mutation=True)

    async def get(self, op: str, path: str, ctx: RequestContext, *,
                  headers: Mapping[str, str] | None = None,
                  query: Mapping[str, str] | None = None) -> RawResponse:
        """One read-only call (retried, errors typed) whose answer the caller decodes itself
        (upstream/table_identity.py); a 304 is returned, not raised."""
        return await self._call(op, "GET", path, ctx, headers=headers, query=query)

    async def forward(self, method: str, path: str, query: str, body: bytes | None,
                      ctx: RequestContext, *,
                      headers: Mapping[str, str] | None = None) -> UpstreamResponse:
        """Pass an allow-listed request through with the gateway's token; any final status
        is returned as is (retryable ones are retried first)."""
        url_path = path + (("?" + query) if query else "")
        resp = await self._call("forward", method, url_path, ctx, body=body,
                                headers=headers, mutation=method not in _SAFE_METHODS,
                                raw=True)
        return UpstreamResponse(status=resp.status, headers=dict(resp.headers), body=resp.body)

    async def health(self) -> bool:
        """`GET /health` answered 200 (one attempt, short timeout, no token)."""
        try:
            resp = await self._send("health", "GET", self._base + "/health", {},
                                    None, min(UPSTREAM_HEALTH_TIMEOUT_S, self.settings.timeout_s))
        except GatewayError:
            return False
        return resp.status == 200
