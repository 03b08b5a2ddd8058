"""Tenant isolation with caller auth on: no caller obtains what its policy does not allow, on any
surface, including right after the owner populated the shared cache.

Two gateways on the real stack: callers mode `token` (tokens file) and mode `jwt` (JWTs verified
against a JWKS the harness serves, so it can also mint tokens with a wrong audience, issuer,
expiry or signature). Both use the same policy: alice may read+write namespace team_a, bob may
only read team_b. A probe leaks when a forbidden request is answered 2xx, or when any answer to a
forbidden request contains a secret vended for the owner's table. Issue #28's probes (case-fold
twins, project headers, rebinding Hosts, another uid) are in hardening/isolation_names.py, issue
#35's hostile raw paths on the forwarded routes in hardening/isolation_paths.py.
"""

from __future__ import annotations

import base64
import json
import secrets
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import quote

import jwt
from cryptography.hazmat.primitives.asymmetric import rsa

from devstack.gateway_proc import events_settings
from devstack.gateway_process import GatewayEndpoints, GatewayProcess
from hardening import event_flood, lockout
from hardening.environment import HarnessContext, gateway_settings, native_path, request_json
from hardening.isolation_names import (
    ERIN_RULE,
    TWIN_NS,
    TWIN_TABLE,
    casefold_probes,
    host_probes,
    project_probes,
    uid_probes,
)
from hardening.isolation_paths import PAULA_RULE, path_probes
from hardening.processes import HarnessError
from hardening.report import IsolationResult

NS_A, NS_B = "team_a", "team_b"
TABLE_A, TABLE_B = "secret_a", "secret_b"
AUDIENCE = "lakegate-harness"
ISSUER = "http://127.0.0.1/harness-issuer"
DENIED = {401, 403, 404}


@dataclass(frozen=True)
class Target:
    """A table and who owns it."""

    namespace: str
    table: str
    owner: str


TARGETS = (Target(NS_A, TABLE_A, "alice"), Target(NS_B, TABLE_B, "bob"))

POLICY = {
    "callers": {
        "alice": [
            {"warehouse": "*", "namespace": "team_a*", "table": "*", "access": ["read", "write"]}
        ],
        "bob": [{"warehouse": "*", "namespace": "team_b*", "table": "*", "access": ["read"]}],
        "carol": [{"warehouse": "*", "namespace": "team_a*", "table": "*", "access": ["read"]}],
        "dave": [{"warehouse": "*", "namespace": "team_a*", "table": "*", "access": ["read"]}],
        "erin": [ERIN_RULE],
        "paula": [PAULA_RULE],
    }
}


# ---- setup on the catalog ----------------------------------------------------------------------


def idp_token(ctx: HarnessContext, client: str = "gateway") -> str:
    """A client-credentials token from the stack's IdP (used only for catalog setup)."""
    idp = ctx.info.idp
    c = idp.clients[client]
    basic = base64.b64encode(f"{c.id}:{c.secret}".encode()).decode()
    req = urllib.request.Request(  # noqa: S310 - loopback IdP
        idp.token_url,
        data=b"grant_type=client_credentials",
        headers={
            "Authorization": f"Basic {basic}",
            "Content-Type": "application/x-www-form-urlencoded",
        },
    )
    with urllib.request.urlopen(req, timeout=10) as resp:  # noqa: S310
        return str(json.loads(resp.read())["access_token"])


def prepare_catalog(ctx: HarnessContext) -> None:
    """Create the two tenants' namespaces and tables directly on the catalog (409 = exists)."""
    token = idp_token(ctx)
    ctx.scanner.add_planted([token])
    wid = ctx.info.warehouse.id
    base = ctx.catalog_url
    for t in (*TARGETS, Target(TWIN_NS, TWIN_TABLE, "alice")):
        status, _ = request_json(
            "POST",
            f"{base}/catalog/v1/{wid}/namespaces",
            {"namespace": [t.namespace]},
            token=token,
            marker=False,
        )
        if status not in (200, 409):
            raise HarnessError(f"create namespace {t.namespace} -> {status}")
        status, _ = request_json(
            "POST",
            f"{base}/lakekeeper/v1/{wid}/namespaces/{quote(t.namespace)}/generic-tables",
            {"name": t.table, "format": "parquet"},
            token=token,
            marker=False,
        )
        if status not in (200, 409):
            raise HarnessError(f"create table {t.table} -> {status}")


# ---- a JWKS the harness controls ---------------------------------------------------------------


class JwksServer:
    """Serves one RSA public key as a JWKS on loopback, and mints tokens with it (or wrongly)."""

    def __init__(self) -> None:
        self.key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        self.foreign = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        self.kid = "harness-1"
        jwk = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(self.key.public_key()))
        jwk.update({"kid": self.kid, "alg": "RS256", "use": "sig"})
        body = json.dumps({"keys": [jwk]}).encode()

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:
                return

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, name="jwks", daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}/jwks"

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    def mint(self, sub: str, **overrides: Any) -> str:
        now = int(time.time())
        claims: dict[str, Any] = {
            "sub": sub,
            "iss": ISSUER,
            "aud": AUDIENCE,
            "iat": now,
            "exp": now + 600,
        }
        key: Any = overrides.pop("key", self.key)
        alg = overrides.pop("alg", "RS256")
        headers = {"kid": overrides.pop("kid", self.kid)}
        for k, v in overrides.items():
            if v is None:
                claims.pop(k, None)
            else:
                claims[k] = v
        return jwt.encode(claims, key, algorithm=alg, headers=headers)

    def bad_tokens(self) -> dict[str, str]:
        """Tokens that must all be refused: each breaks exactly one check."""
        now = int(time.time())
        good = self.mint("alice")
        header, payload, sig = good.split(".")
        forged_payload = (
            base64.urlsafe_b64encode(
                json.dumps(
                    {"sub": "bob", "iss": ISSUER, "aud": AUDIENCE, "iat": now, "exp": now + 600}
                ).encode()
            )
            .rstrip(b"=")
            .decode()
        )
        unsigned_header = (
            base64.urlsafe_b64encode(json.dumps({"alg": "none", "typ": "JWT"}).encode())
            .rstrip(b"=")
            .decode()
        )
        return {
            "wrong_audience": self.mint("alice", aud="urn:someone-else"),
            "wrong_issuer": self.mint("alice", iss="http://evil.example"),
            "expired": self.mint("alice", iat=now - 7200, exp=now - 3600),
            "not_yet_valid": self.mint("alice", nbf=now + 3600),
            "no_expiry": self.mint("alice", exp=None),
            "foreign_key_same_kid": self.mint("alice", key=self.foreign),
            "unknown_kid": self.mint("alice", key=self.foreign, kid="attacker-1"),
            "tampered_payload": f"{header}.{forged_payload}.{sig}",
            "alg_none": f"{unsigned_header}.{payload}.",
            "hs256_with_secret": jwt.encode(
                {"sub": "alice", "iss": ISSUER, "aud": AUDIENCE, "exp": now + 600},
                "k" * 32,
                algorithm="HS256",
            ),
            # Random per run: a constant here is harvested from this source by hypothesis
            # (schemathesis) and sent in fuzzed URL paths, which the DEBUG request log then
            # shows as a "planted" secret.
            "garbage": f"not-a-jwt-{secrets.token_hex(8)}",
            "empty_bearer": "",
        }


# ---- probes -----------------------------------------------------------------------------------


@dataclass
class Prober:
    """Runs one probe on one surface and records the verdict."""

    ctx: HarnessContext
    eps: GatewayEndpoints
    result: IsolationResult
    secrets_by_table: dict[str, set[str]]
    mode: str

    def http(
        self,
        method: str,
        path: str,
        token: str | None,
        body: dict[str, Any] | None = None,
        *,
        headers: dict[str, str] | None = None,
        uds: bool = False,
    ) -> tuple[int, str]:
        if uds:
            return _uds_request(self.eps.http_uds, method, path, token, body, headers)
        url = self.eps.http_url + path
        hdrs = {"X-Lakegate-Request": "1", "Content-Type": "application/json", **(headers or {})}
        if token is not None:
            hdrs["Authorization"] = f"Bearer {token}"
        req = urllib.request.Request(  # noqa: S310 - loopback gateway URL
            url,
            method=method,
            data=json.dumps(body).encode() if body is not None else None,
            headers=hdrs,
        )
        try:
            with urllib.request.urlopen(req, timeout=15) as resp:  # noqa: S310
                return resp.status, resp.read().decode(errors="replace")
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read().decode(errors="replace")

    def surfaces(self, t: Target) -> dict[str, Callable[[str | None], tuple[int, str]]]:
        """Every way to ask for table `t`'s credentials, metadata or listing."""
        wh, wid = self.ctx.warehouse, self.ctx.info.warehouse.id
        ns = quote(t.namespace, safe="")
        tb = quote(t.table, safe="")
        cred = native_path(wh, [t.namespace], t.table, "/credentials")
        delegation = {"X-Iceberg-Access-Delegation": "vended-credentials"}
        return {
            "http:credentials_read": lambda tok: self.http("GET", cred + "?access=read", tok),
            "http:credentials_write": lambda tok: self.http("GET", cred + "?access=write", tok),
            "http:credentials_by_warehouse_id": lambda tok: self.http(
                "GET", native_path(wid, [t.namespace], t.table, "/credentials"), tok
            ),
            "http:credentials_case_variant": lambda tok: self.http(
                "GET",
                native_path(wh.upper(), [t.namespace.upper()], t.table.upper(), "/credentials"),
                tok,
            ),
            "http_uds:credentials_read": lambda tok: self.http("GET", cred, tok, uds=True),
            "http:load_vended": lambda tok: self.http(
                "GET", native_path(wh, [t.namespace], t.table, "?vended=true"), tok
            ),
            "http:load_metadata": lambda tok: self.http(
                "GET", native_path(wh, [t.namespace], t.table), tok
            ),
            "http:list": lambda tok: self.http("GET", native_path(wh, [t.namespace]), tok),
            "aws:credentials": lambda tok: self.http(
                "GET", f"/v1/aws-credentials/{quote(wh)}/{ns}/{tb}", tok
            ),
            "rest:generic_load_vended": lambda tok: self.http(
                "GET",
                f"/lakekeeper/v1/{wid}/namespaces/{ns}/generic-tables/{tb}",
                tok,
                headers=delegation,
            ),
            "rest:generic_credentials": lambda tok: self.http(
                "GET", f"/lakekeeper/v1/{wid}/namespaces/{ns}/generic-tables/{tb}/credentials", tok
            ),
            "rest:generic_list": lambda tok: self.http(
                "GET", f"/lakekeeper/v1/{wid}/namespaces/{ns}/generic-tables", tok
            ),
            "rest:by_warehouse_name": lambda tok: self.http(
                "GET",
                f"/lakekeeper/v1/{quote(wh)}/namespaces/{ns}/generic-tables/{tb}/credentials",
                tok,
            ),
            "rest:iceberg_credentials": lambda tok: self.http(
                "GET", f"/catalog/v1/{wid}/namespaces/{ns}/tables/{tb}/credentials", tok
            ),
            "grpc:credentials": lambda tok: _grpc_call(
                self.eps.grpc_target, "credentials", wh, t, tok
            ),
            "grpc:credentials_uds": lambda tok: _grpc_call(
                "unix:" + self.eps.grpc_uds, "credentials", wh, t, tok
            ),
            "grpc:load_vended": lambda tok: _grpc_call(self.eps.grpc_target, "load", wh, t, tok),
            "grpc:list": lambda tok: _grpc_call(self.eps.grpc_target, "list", wh, t, tok),
        }

    def grpc(self, t: Target, token: str | None,
             metadata: tuple[tuple[str, str], ...] = ()) -> tuple[int, str]:
        """gRPC GetTableCredentials for `t` with extra metadata."""
        return _grpc_call(self.eps.grpc_target, "credentials", self.ctx.warehouse, t, token,
                          metadata)

    def expect_allowed(
        self, surface: str, call: Callable[[str | None], tuple[int, str]], token: str, t: Target
    ) -> None:
        """The owner's request: must succeed where the policy grants it (records its secrets)."""
        status, body = call(token)
        self.secrets_by_table.setdefault(t.table, set()).update(_secrets_in(body))
        ok = 200 <= status < 300
        # Owner probes are not isolation cases, but a refused owner makes the test vacuous.
        if not ok and not (t.owner == "bob" and "write" in surface) and "iceberg" not in surface:
            self.result.failures.append(
                f"[{self.mode}] owner {t.owner} refused on {surface}: {status} (probe is vacuous)"
            )

    def expect_denied(
        self,
        surface: str,
        call: Callable[[str | None], tuple[int, str]],
        token: str | None,
        who: str,
        t: Target,
    ) -> None:
        status, body = call(token)
        leaked_secret = any(s and s in body for s in self.secrets_by_table.get(t.table, set()))
        leaked = (200 <= status < 300) or leaked_secret or status >= 500
        self.result.record(
            surface.split(":")[0],
            leaked,
            f"[{self.mode}] {who} on {t.namespace}.{t.table} via {surface}: {status}"
            + (" (owner's secret in body)" if leaked_secret else ""),
            status,
        )


def _secrets_in(body: str) -> set[str]:
    """Credential values in a JSON answer (any shape: native, REST, AWS, gRPC-as-text)."""
    out: set[str] = set()
    try:
        doc = json.loads(body)
    except ValueError:
        return {
            line.split("=", 1)[1]
            for line in body.splitlines()
            if "=" in line and len(line.split("=", 1)[1]) >= 16
        }

    def walk(node: Any) -> Iterator[tuple[str, Any]]:
        if isinstance(node, dict):
            for k, v in node.items():
                yield str(k), v
                yield from walk(v)
        elif isinstance(node, list):
            for v in node:
                yield from walk(v)

    for key, value in walk(doc):
        if isinstance(value, str) and any(
            m in key.lower() for m in ("access-key", "secret", "token", "accesskeyid")
        ):
            if len(value) >= 16:
                out.add(value)
    return out


def _uds_request(
    path: str, method: str, target: str, token: str | None, body: dict[str, Any] | None,
    extra: dict[str, str] | None = None,
) -> tuple[int, str]:
    import http.client
    import socket

    class UnixConnection(http.client.HTTPConnection):
        def connect(self) -> None:
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.settimeout(15)
            s.connect(path)
            self.sock = s

    conn = UnixConnection("localhost")
    headers = {"X-Lakegate-Request": "1", **(extra or {})}
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    try:
        conn.request(
            method, target, body=json.dumps(body) if body is not None else None, headers=headers
        )
        resp = conn.getresponse()
        return resp.status, resp.read().decode(errors="replace")
    finally:
        conn.close()


def _grpc_call(
    target: str, kind: str, warehouse: str, t: Target, token: str | None,
    extra_md: tuple[tuple[str, str], ...] = (),
) -> tuple[int, str]:
    """One gRPC call mapped to an HTTP-like status (200 OK, 401/403/404 denials, 500 otherwise)."""
    import grpc

    from lakegate.v1 import (
        catalog_pb2,
        catalog_pb2_grpc,
        common_pb2,
        credentials_pb2,
        credentials_pb2_grpc,
    )

    md = ((("authorization", f"Bearer {token}"),) if token is not None else ()) + extra_md
    ref = common_pb2.TableRef(warehouse=warehouse, namespace=[t.namespace], name=t.table)
    codes = {
        grpc.StatusCode.UNAUTHENTICATED: 401,
        grpc.StatusCode.PERMISSION_DENIED: 403,
        grpc.StatusCode.NOT_FOUND: 404,
        grpc.StatusCode.INVALID_ARGUMENT: 400,
        grpc.StatusCode.RESOURCE_EXHAUSTED: 429,
        grpc.StatusCode.UNAVAILABLE: 503,
    }
    with grpc.insecure_channel(target) as ch:
        try:
            if kind == "credentials":
                resp = credentials_pb2_grpc.CredentialServiceStub(ch).GetTableCredentials(
                    credentials_pb2.GetTableCredentialsRequest(
                        table=ref, access=common_pb2.ACCESS_MODE_READ
                    ),
                    metadata=md,
                    timeout=15,
                )
                return 200, json.dumps(
                    {"credentials": [{"config": dict(c.config)} for c in resp.credentials]}
                )
            if kind == "load":
                resp = catalog_pb2_grpc.CatalogServiceStub(ch).LoadTable(
                    catalog_pb2.LoadTableRequest(
                        table=ref, vended=True, access=common_pb2.ACCESS_MODE_READ
                    ),
                    metadata=md,
                    timeout=15,
                )
                return 200, json.dumps(
                    {"credentials": [{"config": dict(c.config)} for c in resp.credentials]}
                )
            resp = catalog_pb2_grpc.CatalogServiceStub(ch).ListTables(
                catalog_pb2.ListTablesRequest(warehouse=warehouse, namespace=[t.namespace]),
                metadata=md,
                timeout=15,
            )
            return 200, json.dumps({"identifiers": [i.name for i in resp.identifiers]})
        except grpc.RpcError as exc:
            return codes.get(exc.code(), 500), f"{exc.code().name}: {exc.details()}"


# ---- the suite ----------------------------------------------------------------------------------


def _isolation_round(prober: Prober, tokens: dict[str, str]) -> None:
    """Owner first (fills the cache), then the other caller on every surface, then no token."""
    for t in TARGETS:
        other = "bob" if t.owner == "alice" else "alice"
        for surface, call in prober.surfaces(t).items():
            prober.expect_allowed(surface, call, tokens[t.owner], t)
        for surface, call in prober.surfaces(t).items():
            prober.expect_denied(surface, call, tokens[other], other, t)
            prober.expect_denied(surface, call, None, "anonymous", t)
        # bob may only read his table: a write credential is refused even for the owner.
        if t.owner == "bob":
            cred = native_path(
                prober.ctx.warehouse, [t.namespace], t.table, "/credentials?access=write"
            )
            prober.expect_denied(
                "http:owner_write_without_grant",
                lambda tok, c=cred: prober.http("GET", c, tok),
                tokens["bob"],
                "bob",
                t,
            )
    # Whole-cache invalidation needs a global grant; a tenant must not be able to flush everyone.
    prober.expect_denied(
        "http:invalidate_all",
        lambda tok: prober.http("POST", "/v1/cache/invalidate", tok, {"all": True}),
        tokens["alice"],
        "alice",
        TARGETS[1],
    )
    # Without the anti-SSRF marker and without auth, nothing is answered.
    cred = native_path(prober.ctx.warehouse, [NS_A], TABLE_A, "/credentials")
    prober.expect_denied(
        "http:forgeable_no_marker",
        lambda tok: _no_marker_get(prober.eps.http_url + cred),
        None,
        "browser",
        TARGETS[0],
    )


def _issue_28_round(prober: Prober, tokens: dict[str, str]) -> None:
    """Case-fold twins, project-header swaps and rebinding Hosts (hardening/isolation_names.py)."""
    wh = prober.ctx.warehouse
    casefold_probes(prober, tokens, wh, Target(TWIN_NS, TWIN_TABLE, "alice"))
    project_probes(prober, tokens, wh, TARGETS)
    host_probes(prober, tokens, wh, TARGETS)


def _lockout_round(ctx: HarnessContext, eps: GatewayEndpoints, token: str,
                   result: IsolationResult) -> None:
    """Issue #35 finding 2, measured: a bad-token flood from another process on each shared
    surface (hardening/lockout.py) against alice reading her own table."""
    t = TARGETS[0]
    path = native_path(ctx.warehouse, [t.namespace], t.table, "/credentials")
    ref = {"warehouse": ctx.warehouse, "namespace": [t.namespace], "table": t.table}
    where = {"http_uds": eps.http_uds, "grpc_uds": f"unix:{eps.grpc_uds}",
             "http_tcp": eps.http_url}
    for surface in lockout.SURFACES:
        result.lockout_measured(lockout.measure(ctx.python, ctx.repo_root, ctx.run_dir, surface,
                                                where[surface], path, ref, token))


def _event_flood_round(ctx: HarnessContext, tokens_file: Path, token: str,
                       result: IsolationResult) -> dict[str, Any] | None:
    """Issue #35 finding 3, measured: a change-event flood on the stack's NATS subject against
    alice reading her own table through a subscribed gateway (hardening/event_flood.py)."""
    events = events_settings(ctx.info)
    if not events or ctx.info.nats is None:
        return {"event_flood": "skipped: the stack runs without NATS"}
    t = TARGETS[0]
    path = native_path(ctx.warehouse, [t.namespace], t.table, "/credentials")
    extra = {"CALLERS__MODE": "token", "CALLERS__TOKENS_FILE": str(tokens_file), **events}
    with _gateway(ctx, "iso-events", extra) as gw:
        assert gw.endpoints is not None
        result.event_flood_measured(event_flood.measure(
            ctx.python, ctx.repo_root, ctx.run_dir, gw.endpoints.http_uds,
            gw.endpoints.http_url, path, token, ctx.info.nats.url, ctx.info.nats.subject,
            ctx.info.warehouse.id))
    return None


def _no_marker_get(url: str) -> tuple[int, str]:
    req = urllib.request.Request(url)  # noqa: S310
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:  # noqa: S310
            return resp.status, resp.read().decode(errors="replace")
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode(errors="replace")


@contextmanager
def _gateway(ctx: HarnessContext, name: str, extra: dict[str, str]) -> Iterator[GatewayProcess]:
    gw_dir = ctx.run_dir / "gateways" / name
    gw_dir.mkdir(parents=True, exist_ok=True)
    policy = gw_dir / "policy.json"
    policy.write_text(json.dumps(POLICY))
    env = gateway_settings(ctx, CALLERS__POLICY_FILE=str(policy), **extra)
    gw = GatewayProcess(gw_dir, env, repo_root=ctx.repo_root, name=name, python=ctx.python)
    try:
        gw.start(ready=False)
        if gw.wait_ready(60) is None:
            raise HarnessError(f"{name} never became ready")
        yield gw
    finally:
        gw.stop()


def run_isolation_suite(ctx: HarnessContext, result: IsolationResult) -> dict[str, Any]:
    """Both caller-auth modes, every surface; probes are recorded in `result`."""
    prepare_catalog(ctx)
    extra_info: dict[str, Any] = {}

    # -- mode token --
    tokens = {
        name: f"lg-{name}-{secrets.token_urlsafe(24)}"
        for name in ("alice", "bob", "carol", "dave", "erin", "paula")
    }
    ctx.scanner.add_planted(tokens.values())
    tokens_file = ctx.run_dir / "gateways" / "iso-token" / "tokens.json"
    tokens_file.parent.mkdir(parents=True, exist_ok=True)
    tokens_file.write_text(json.dumps({tok: name for name, tok in tokens.items()}))
    with _gateway(
        ctx, "iso-token", {"CALLERS__MODE": "token", "CALLERS__TOKENS_FILE": str(tokens_file)}
    ) as gw:
        assert gw.endpoints is not None
        prober = Prober(ctx, gw.endpoints, result, {}, "token")
        _isolation_round(prober, tokens)
        _issue_28_round(prober, tokens)
        path_probes(prober, tokens, ctx.info.warehouse.id, TARGETS[0])
        skipped = uid_probes(prober, tokens, ctx.warehouse, TARGETS, result)
        if skipped:
            extra_info["uid_probes"] = skipped
        for name, bad in {
            "unknown_token": "lg-nobody-" + secrets.token_urlsafe(16),
            "truncated_token": tokens["alice"][:-1],
        }.items():
            for surface, call in prober.surfaces(TARGETS[0]).items():
                prober.expect_denied(f"{surface.split(':')[0]}:{name}", call, bad, name, TARGETS[0])
        ctx.scanner.add_planted(s for v in prober.secrets_by_table.values() for s in v)
        _lockout_round(ctx, gw.endpoints, tokens["alice"], result)
    skipped_flood = _event_flood_round(ctx, tokens_file, tokens["alice"], result)
    if skipped_flood:
        extra_info.update(skipped_flood)

    # -- mode jwt --
    jwks = JwksServer()
    jwks.start()
    try:
        extra = {
            "CALLERS__MODE": "jwt",
            "CALLERS__JWKS_URL": jwks.url,
            "CALLERS__ISSUER": ISSUER,
            "CALLERS__AUDIENCE": AUDIENCE,
            "CALLERS__NAME_CLAIM": "sub",
        }
        with _gateway(ctx, "iso-jwt", extra) as gw:
            assert gw.endpoints is not None
            jwt_tokens = {name: jwks.mint(name) for name in ("alice", "bob", "erin", "paula")}
            ctx.scanner.add_planted(jwt_tokens.values())
            prober = Prober(ctx, gw.endpoints, result, {}, "jwt")
            _isolation_round(prober, jwt_tokens)
            _issue_28_round(prober, jwt_tokens)
            path_probes(prober, jwt_tokens, ctx.info.warehouse.id, TARGETS[0])
            for name, bad in jwks.bad_tokens().items():
                ctx.scanner.add_planted([bad])
                for surface, call in prober.surfaces(TARGETS[0]).items():
                    prober.expect_denied(
                        f"{surface.split(':')[0]}:jwt_{name}",
                        call,
                        bad or None,
                        f"jwt {name}",
                        TARGETS[0],
                    )
            ctx.scanner.add_planted(s for v in prober.secrets_by_table.values() for s in v)
    finally:
        jwks.stop()
    extra_info["tokens"] = {k: "<planted>" for k in tokens}
    return extra_info


def rate_limit_gateway(
    ctx: HarnessContext, rate_per_s: int, burst: int
) -> tuple[GatewayProcess, dict[str, str], Path]:
    """A token-mode gateway with a per-caller ingress limit (caller must stop it)."""
    tokens = {name: f"lg-{name}-{secrets.token_urlsafe(24)}" for name in ("carol", "dave")}
    ctx.scanner.add_planted(tokens.values())
    gw_dir = ctx.run_dir / "gateways" / "ratelimit"
    gw_dir.mkdir(parents=True, exist_ok=True)
    (gw_dir / "tokens.json").write_text(json.dumps({tok: name for name, tok in tokens.items()}))
    (gw_dir / "policy.json").write_text(json.dumps(POLICY))
    env = gateway_settings(
        ctx,
        CALLERS__MODE="token",
        CALLERS__TOKENS_FILE=str(gw_dir / "tokens.json"),
        CALLERS__POLICY_FILE=str(gw_dir / "policy.json"),
        CALLERS__RATE_PER_S=str(rate_per_s),
        CALLERS__BURST=str(burst),
    )
    gw = GatewayProcess(gw_dir, env, repo_root=ctx.repo_root, name="ratelimit", python=ctx.python)
    gw.start(ready=False)
    if gw.wait_ready(60) is None:
        gw.stop()
        raise HarnessError("rate-limit gateway never became ready")
    return gw, tokens, gw_dir
