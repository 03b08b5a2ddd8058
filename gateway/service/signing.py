"""SigningService: an S3 request signed for one table, on the node or by the catalog's signer.

The caller policy has already allowed the caller this table and the request's access mode (the
surface checks it). Then:
- The table's credential comes from the credential cache (single-flight, refresh-ahead, serve
  floor; the same entry a vended load uses, for the request's access mode, so the STS session
  policy of a read credential also refuses a write at the store).
- The location the request may touch is the table's as the identity guard confirmed it with
  the catalog (else the credential's prefix); the request is checked against it and against the
  store address of the table's S3 keys (gateway/signing/request.py).
- With an S3 key in the credential (an STS warehouse), the request is signed here with
  botocore's SigV4 (gateway/signing/sigv4.py): no catalog call per signature. A credential with
  less than `MIN_SIGN_LEFT_S` left is never used (a signature dies with its session token).
  The signature's time is the catalog's clock when the gateway knows the local one is off by
  more than the skew bound (the store runs with the catalog, not with this node), else local.
- Without one (a warehouse that only signs), the checked request is forwarded to the catalog's
  signer (`POST /catalog/v1/{warehouse-id}/v1/aws/s3/sign`, Lakekeeper's location route) over
  the gateway's one session, and its answer passed back.
Every decision is audited like a credential grant (outcome `signed-local`, `signed-forwarded`).
"""

from __future__ import annotations

import datetime
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, Protocol
from urllib.parse import quote

from cachetools import TTLCache

from gateway.audit import AuditTrail
from gateway.clock import Clock
from gateway.concurrency import SingleFlight, Spawn
from gateway.errors import (
    CredentialExpiredError,
    GatewayError,
    NotFoundError,
    ProtocolViolationError,
    UnavailableError,
    UpstreamBadRequestError,
)
from gateway.identity import covers
from gateway.metrics import Metrics
from gateway.models import AccessMode, CredentialLookup, RequestContext, TableRef
from gateway.names import fold_namespace, fold_table, join_namespace
from gateway.signing.request import (
    SignRequest,
    SignTarget,
    StoreAddress,
    access_for,
    check_request,
)
from gateway.signing.sigv4 import SigningKeys, sign_headers

if TYPE_CHECKING:
    from collections.abc import Mapping

    from gateway.models import UpstreamResponse

# A signature is used within seconds, but Iceberg Java reuses a GET/HEAD one for 30 s and S3
# accepts it for 15 min: never sign with a session token that dies sooner than this.
MIN_SIGN_LEFT_S = 120.0
Mode = Literal["local", "forwarded"]
ADDRESS_TTL_S = 300.0
_CLIENT_MANAGED = {"X-Iceberg-Access-Delegation": "client-managed"}
AddressKey = tuple[str, tuple[str, ...], str]


class SigningOps(Protocol):
    """What signing needs of the gateway's operations (GatewayService has them)."""

    def credentials_now(self, ref: TableRef, access: AccessMode, ctx: RequestContext
                        ) -> CredentialLookup | None: ...

    async def get_credentials(self, ref: TableRef, access: AccessMode, ctx: RequestContext
                              ) -> CredentialLookup: ...

    async def forward(self, method: str, path: str, query: str, body: bytes | None,
                      ctx: RequestContext, headers: Mapping[str, str] | None = None,
                      ) -> UpstreamResponse: ...


@dataclass(frozen=True)
class TableAddress:
    """Where a table's objects are: its location and its store's address."""

    location: str
    store: StoreAddress


@dataclass(frozen=True)
class Signed:
    """A sign answer: Iceberg's `RemoteSignResult` and how it was made."""

    uri: str
    headers: dict[str, list[str]]
    mode: Mode
    access: AccessMode
    cacheable: bool  # GET/HEAD: the answer may carry `Cache-Control: private`


def _s3_keys(lookup: CredentialLookup) -> tuple[str, dict[str, str]] | None:
    """(prefix, config) of the S3 key credential covering the table, None without one."""
    location = lookup.credentials.location
    best = None
    for cred in lookup.credentials.credentials:
        if "s3.access-key-id" not in cred.config or (location and not covers(cred.prefix,
                                                                            location)):
            continue
        if best is None or len(cred.prefix) > len(best.prefix):
            best = cred
    return (best.prefix, dict(best.config)) if best is not None else None


def _address_of(doc: Any) -> TableAddress:
    """A client-managed `LoadTableResult`'s location and S3 address keys."""
    try:
        location = doc["metadata"]["location"]
        config = doc.get("config") or {}
    except (KeyError, TypeError, AttributeError):
        location = None
    if not isinstance(location, str) or not location or not isinstance(config, dict):
        raise NotFoundError("the catalog's load gave no table location",
                            lakekeeper_type="NoSuchTableException")
    return TableAddress(location, StoreAddress.of({k: v for k, v in config.items()
                                                   if isinstance(v, str)}))


class SigningService:
    """Signs for the HTTP signer surface (one per daemon).

    Args:
        ops: the gateway's operations (credentials, warehouse resolution, forwarding).
        clock: the local clock.
        reference_now: the catalog's clock carried forward (epoch s) or None (local time
            only); used when it disagrees with the local one by more than `max_skew_s`.
        audit: the audit trail.
    """

    def __init__(self, ops: SigningOps, clock: Clock, spawn: Spawn, *,
                 audit: AuditTrail | None = None,
                 reference_now: Callable[[], float | None] = lambda: None,
                 max_skew_s: float = 60.0, address_ttl_s: float = ADDRESS_TTL_S,
                 max_entries: int = 4096, wait_s: float = 30.0,
                 metrics: Metrics | None = None) -> None:
        self._ops = ops
        self._clock = clock
        self._audit = audit
        self._reference_now = reference_now
        self._max_skew_s = max_skew_s
        self._wait_s = wait_s
        self._metrics = metrics
        self._addresses: TTLCache[AddressKey, TableAddress] = TTLCache(
            maxsize=max_entries, ttl=address_ttl_s, timer=clock.monotonic)
        self._loads: SingleFlight[AddressKey, TableAddress] = SingleFlight(spawn)
        self._keys = SigningKeys()

    def _now(self) -> datetime.datetime:
        now = self._clock.now()
        ref = self._reference_now()
        if ref is not None and abs(ref - now) > self._max_skew_s:
            now = ref
        return datetime.datetime.fromtimestamp(now, datetime.UTC).replace(tzinfo=None)

    def _record(self, ctx: RequestContext, ref: TableRef, access: AccessMode, outcome: str,
                mode: str) -> None:
        if self._metrics is not None:
            self._metrics.sign_requests.labels(mode).inc()
        if self._audit is not None:
            self._audit.credential(ctx, ref.scope, access, outcome)

    async def sign(self, ref: TableRef, req: SignRequest, ctx: RequestContext) -> Signed:
        """Sign `req` for table `ref` (the caller policy allowed `access_for(req)` on it).

        Raises:
            InvalidRequestError, PermissionDeniedError: the request is refused (nothing signed).
            NotFoundError, UpstreamError: as the cache or the catalog answer.
            CredentialExpiredError: no credential with enough life left to sign with.
        """
        access = access_for(req)
        try:
            # A confirmed cache hit needs no coroutine (nearly every signature of a scan).
            lookup = self._ops.credentials_now(ref, access, ctx) \
                or await self._ops.get_credentials(ref, access, ctx)
            keys = _s3_keys(lookup)
            if keys is not None:
                location = lookup.credentials.location or keys[0]
                store = StoreAddress.of(keys[1])
            else:
                address = await self._address(lookup, ctx)
                location, store = address.location, address.store
            target = check_request(req, store, location)
            if keys is None:
                signed = await self._forward(lookup, req, target, ctx)
            else:
                if lookup.remaining_s is not None and lookup.remaining_s < MIN_SIGN_LEFT_S:
                    raise CredentialExpiredError("the table's credential is too close to expiry")
                config = keys[1]
                headers = sign_headers(req, config["s3.access-key-id"],
                                       config.get("s3.secret-access-key", ""),
                                       config.get("s3.session-token"), self._now(), self._keys)
                signed = Signed(req.uri, headers, "local", target.access,
                                req.method in ("GET", "HEAD"))
        except GatewayError as exc:
            self._record(ctx, ref, access, f"sign-refused:{type(exc).__name__}", "refused")
            raise
        self._record(ctx, ref, access, f"signed-{signed.mode}", signed.mode)
        return signed

    def remember(self, warehouse_id: str, ref: TableRef, location: str,
                 config: Mapping[str, Any]) -> None:
        """A load answer's table location and S3 keys (the surface saw one): the forwarded
        mode then needs no load of its own for this table."""
        strings = {k: v for k, v in config.items() if isinstance(v, str)}
        self._addresses[self._key(warehouse_id, ref)] = TableAddress(location,
                                                                      StoreAddress.of(strings))

    @staticmethod
    def _key(warehouse_id: str, ref: TableRef) -> AddressKey:
        return (warehouse_id.lower(), fold_namespace(ref.namespace),
                fold_table(ref.name, plus_is_space=True))

    async def _address(self, lookup: CredentialLookup, ctx: RequestContext) -> TableAddress:
        """The table's address: remembered, else one shared client-managed load."""
        ref, wid = lookup.ref, lookup.warehouse.id
        key = self._key(wid, ref)
        hit = self._addresses.get(key)
        if hit is not None:
            return hit
        ns = quote(join_namespace(ref.namespace), safe="")
        table = quote(ref.name, safe="")
        path = f"/catalog/v1/{quote(wid, safe='')}/namespaces/{ns}/tables/{table}"

        async def load() -> TableAddress:
            resp = await self._ops.forward("GET", path, "", None, ctx, headers=_CLIENT_MANAGED)
            if resp.status == 404:
                raise NotFoundError("Table does not exist", lakekeeper_type="NoSuchTableException")
            if resp.status != 200:
                raise UnavailableError(f"the catalog's load answered {resp.status}")
            try:
                doc = json.loads(resp.body)
            except ValueError:
                raise ProtocolViolationError("the catalog's load answered garbage") from None
            address = _address_of(doc)
            self._addresses[key] = address
            return address

        value, _ = await self._loads.run(key, load, timeout_s=self._wait_s)
        return value

    async def _forward(self, lookup: CredentialLookup, req: SignRequest, target: SignTarget,
                       ctx: RequestContext) -> Signed:
        wid = lookup.warehouse.id
        resp = await self._ops.forward("POST", f"/catalog/v1/{wid}/v1/aws/s3/sign", "",
                                       json.dumps(req.wire()).encode(), ctx)
        if 400 <= resp.status < 500:  # the catalog refused: its status, never a 5xx
            raise UpstreamBadRequestError(f"the catalog's signer refused: {resp.status}",
                                          status=resp.status)
        if resp.status != 200:
            raise UnavailableError(f"the catalog's signer answered {resp.status}")
        try:
            doc: Any = json.loads(resp.body)
            headers = {str(k): [str(v) for v in vals] for k, vals in doc["headers"].items()
                       if str(k).lower() != "cache-control"}
            uri = str(doc["uri"])
        except (ValueError, KeyError, TypeError, AttributeError):
            raise ProtocolViolationError("the catalog's signer answered garbage") from None
        if uri != req.uri:
            raise ProtocolViolationError("the catalog's signer changed the URI")
        return Signed(uri, headers, "forwarded", target.access, req.method in ("GET", "HEAD"))
