"""The SAS-checking layer in front of Azurite, which refuses Lakekeeper's directory SAS.

Lakekeeper vends a directory SAS (`sr=d`, `sdd` = the depth of the table path, signed over
`/blob/<account>/<filesystem>/<table path>`: crates/lakekeeper/src/service/storage/az/mod.rs
`canonical_resource`, `build_directory_sas`). Azurite answers 403 to any `sr=d`, so without
this layer the stack could only vend a container SAS and a table's credential reached every
other table's prefix. The layer does what Azure does for a directory SAS:

- the directory is the first `sdd` segments of the blob path (of a list's `prefix`); the
  signature is checked over that directory with the account key (a SAS for one table names
  another directory than another table's path: 403 `AuthenticationFailed`);
- start and expiry (`st`, `se`), protocol (`spr` must allow http), version;
- the operation's permission: read (`r`) for GET/HEAD of a blob, list (`l`) for a container
  listing, write (`w`) for a put of a blob, block, block list, metadata or properties, add
  (`a`) for an append block, delete (`d`) for a delete; anything else (container calls, copies,
  batches) is refused (403 `AuthorizationPermissionMismatch`);
- a list is allowed only for a prefix inside the directory (`<dir>/...`; `lake/t1` would also
  list `lake/t10/`), a name or prefix with a `.` or `..` segment is refused (400);
- a DFS call (`action=`, `resource=`: Arrow's hierarchical-namespace probe) is answered as a
  flat account answers it, 400 `HierarchicalNamespaceNotEnabled` (Azurite has no DFS API).

An allowed request is forwarded on its raw path (never a normalised one) with the SAS replaced
by a container SAS the layer holds (signed with the account key). Any other request (a
container or account SAS, a shared key) passes unchanged: Azurite enforces those itself.

Run: `python -m devstack.adls_guard --config guard.json` (`port`, `upstream`: Azurite's root
URL, `account`, `key`: the base64 account key).
"""

from __future__ import annotations

import argparse
import base64
import datetime as dt
import hashlib
import hmac
import json
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import parse_qsl, quote, unquote

import aiohttp
from aiohttp import web
from yarl import URL

from devstack.emulator.sas import SasRequest, sign
from devstack.guard_upstream import forward_through_session

MAX_BODY_BYTES = 512 * 1024 * 1024
HOLDER_SAS_LIFETIME_S = 24 * 3600  # the layer's own container SAS, re-signed when half gone
# The query parameters of a service SAS (replaced by the layer's own on a forward).
SAS_PARAMS = frozenset({"sv", "st", "se", "sr", "sp", "spr", "sip", "si", "sdd", "sig", "ses",
                        "rscc", "rscd", "rsce", "rscl", "rsct", "skoid", "sktid", "skt", "ske",
                        "sks", "skv", "saoid", "suoid", "scid"})
_HOP_HEADERS = frozenset({"host", "content-length", "transfer-encoding", "connection",
                          "keep-alive"})
GUARD_STATE: web.AppKey[AdlsGuard] = web.AppKey("adls_guard")
log = logging.getLogger("devstack.adls_guard")


class Refused(Exception):
    """A request the layer refuses, with Azure's status and error code."""

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message


@dataclass(frozen=True)
class Operation:
    """What a blob-service request does: the container, the blob path (or the list prefix)
    inside it, and the SAS permission it needs."""

    container: str
    path: str
    permission: str
    lists: bool = False


def _parse_time(value: str) -> dt.datetime:
    try:
        return dt.datetime.strptime(value, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=dt.UTC)
    except ValueError as exc:
        raise Refused(403, "AuthenticationFailed", "SAS time is malformed") from exc


def _dot_segment(path: str) -> bool:
    return any(part in (".", "..") for part in path.split("/"))


def operation(method: str, raw_path: str, query: Mapping[str, str], account: str,
              copy_source: str | None) -> Operation:
    """The operation of one path-style request (`/<account>/<container>[/<blob...>]`).

    Raises:
        Refused: another account, a shape a directory SAS may not do, a dot segment.
    """
    parts = raw_path.lstrip("/").split("/")
    if len(parts) < 2 or unquote(parts[0]) != account or not parts[1]:
        raise Refused(403, "AuthorizationFailure", "not a blob of this account")
    container = unquote(parts[1])
    blob = "/".join(unquote(p) for p in parts[2:])
    if "action" in query or "resource" in query:  # a DFS call: Azurite's account is flat
        raise Refused(400, "HierarchicalNamespaceNotEnabled",
                      "This operation is only supported on a hierarchical namespace account.")
    comp = query.get("comp", "")
    if not blob:
        if method == "GET" and query.get("restype") == "container" and comp == "list":
            prefix = query.get("prefix", "")
            if _dot_segment(prefix):
                raise Refused(400, "InvalidQueryParameterValue", "a prefix with a dot segment")
            return Operation(container, prefix, "l", lists=True)
        raise Refused(403, "AuthorizationPermissionMismatch",
                      "a directory SAS cannot change or read a container")
    if _dot_segment(blob):
        raise Refused(400, "InvalidUri", "a blob name with a '.' or '..' segment")
    if copy_source is not None:
        raise Refused(403, "AuthorizationPermissionMismatch", "copies are not allowed")
    if method in ("GET", "HEAD"):
        return Operation(container, blob, "r")
    if method == "PUT":
        return Operation(container, blob, "a" if comp == "appendblock" else "w")
    if method == "DELETE":
        return Operation(container, blob, "d")
    raise Refused(403, "AuthorizationPermissionMismatch", f"{method} is not allowed")


def directory_of(path: str, depth: int, *, lists: bool) -> str:
    """The directory a directory SAS of depth `depth` is checked against: the first `depth`
    segments of the blob path; a list's prefix must lie inside it (`<dir>/...`).

    Raises:
        Refused: the path is not below a directory of that depth.
    """
    segments = path.split("/")
    if depth < 1 or len(segments) <= depth or (lists and not path.startswith(
            "/".join(segments[:depth]) + "/")):
        raise Refused(403, "AuthorizationResourceTypeMismatch",
                      "the request is not inside the SAS directory")
    return "/".join(segments[:depth])


@dataclass
class AdlsGuard:
    """The account key, the upstream, and the container SAS the layer forwards with."""

    upstream: str
    account: str
    key_b64: str
    now: Callable[[], dt.datetime] = field(default=lambda: dt.datetime.now(dt.UTC))
    session: aiohttp.ClientSession | None = None
    refused: int = 0
    _holders: dict[str, tuple[str, dt.datetime]] = field(default_factory=dict)

    def verify(self, op: Operation, sas: Mapping[str, str]) -> None:
        """Check a directory SAS for `op` as Azure would (module docstring).

        Raises:
            Refused: a bad signature, time, protocol or permission.
        """
        unsupported = {"si", "sip", "ses", "rscc", "rscd", "rsce", "rscl", "rsct"} & set(sas)
        if unsupported or "skoid" in sas:
            raise Refused(403, "AuthenticationFailed", "SAS fields this layer does not check")
        try:
            depth = int(sas.get("sdd", ""))
        except ValueError as exc:
            raise Refused(403, "AuthenticationFailed", "sdd is missing or malformed") from exc
        directory = directory_of(op.path, depth, lists=op.lists)
        now = self.now()
        expiry = _parse_time(sas.get("se", ""))
        start = _parse_time(sas["st"]) if sas.get("st") else None
        if expiry <= now or (start is not None and start > now):
            raise Refused(403, "AuthenticationFailed", "SAS is not valid at this time")
        protocol = sas.get("spr", "https,http")
        if "http" not in protocol.split(","):
            raise Refused(403, "AuthorizationProtocolMismatch", "SAS requires https")
        request = SasRequest(
            account=self.account, container=op.container, permissions=sas.get("sp", ""),
            start=start or expiry, expiry=expiry, resource="d", path=directory,
            protocol=sas.get("spr", ""), version=sas.get("sv", ""),
        )  # fmt: skip
        fields = request.string_to_sign().split("\n")
        if start is None:
            fields[1] = ""  # no `st`: the signed start is empty
        digest = hmac.new(base64.b64decode(self.key_b64), "\n".join(fields).encode(),
                          hashlib.sha256).digest()
        if not hmac.compare_digest(base64.b64encode(digest).decode(), sas.get("sig", "")):
            raise Refused(403, "AuthenticationFailed",
                          "Signature did not match: the SAS is for another directory")
        if op.permission not in sas.get("sp", ""):
            raise Refused(403, "AuthorizationPermissionMismatch",
                          "the SAS does not allow this operation")

    def holder_sas(self, container: str) -> str:
        """The layer's own container SAS (every blob permission), re-signed when half gone."""
        now = self.now()
        held = self._holders.get(container)
        if held is None or (held[1] - now).total_seconds() < HOLDER_SAS_LIFETIME_S / 2:
            expiry = now + dt.timedelta(seconds=HOLDER_SAS_LIFETIME_S)
            token = sign(SasRequest(self.account, container, "racwdl",
                                    now - dt.timedelta(minutes=5), expiry), self.key_b64)
            held = self._holders[container] = (token, expiry)
        return held[0]


def _error(refused: Refused, head: bool) -> web.Response:
    """Azure's error: an XML body, or for a HEAD only the `x-ms-error-code` header (an SDK
    parses a body it is told is XML, and a HEAD has none)."""
    headers = {"x-ms-error-code": refused.code}
    if head:
        return web.Response(status=refused.status, headers=headers)
    body = (f'<?xml version="1.0" encoding="utf-8"?><Error><Code>{refused.code}</Code>'
            f"<Message>{refused.message}</Message></Error>").encode()
    return web.Response(status=refused.status, body=body, content_type="application/xml",
                        headers=headers)


async def handle(request: web.Request) -> web.StreamResponse:
    state = request.app[GUARD_STATE]
    raw_path, _, raw_query = request.raw_path.partition("?")
    pairs = parse_qsl(raw_query, keep_blank_values=True)
    query = dict(pairs)
    target = raw_path + (f"?{raw_query}" if raw_query else "")
    if query.get("sr") == "d":
        try:
            op = operation(request.method, raw_path, query, state.account,
                           request.headers.get("x-ms-copy-source"))
            state.verify(op, query)
        except Refused as exc:
            state.refused += 1
            log.info("refused %s %s: %s", request.method, raw_path, exc.code)
            return _error(exc, request.method == "HEAD")
        kept = [(k, v) for k, v in pairs if k not in SAS_PARAMS]
        rest = "&".join(f"{quote(k, safe='')}={quote(v, safe='')}" for k, v in kept)
        target = f"{raw_path}?{state.holder_sas(op.container)}" + (f"&{rest}" if rest else "")
    assert state.session is not None
    headers = {k: v for k, v in request.headers.items() if k.lower() not in _HOP_HEADERS}
    body = await request.read()
    async with state.session.request(
        request.method, URL(state.upstream + target, encoded=True), data=body,
        headers=headers, allow_redirects=False,
    ) as answer:  # fmt: skip
        payload = await answer.read()
        out = {k: v for k, v in answer.headers.items()
               if k.lower() not in _HOP_HEADERS and k.lower() != "content-encoding"}
        if request.method == "HEAD" and "Content-Length" in answer.headers:
            out["Content-Length"] = answer.headers["Content-Length"]
            response = web.Response(status=answer.status, headers=out)
            return response
        return web.Response(status=answer.status, body=payload, headers=out)


def create_app(upstream: str, account: str, key_b64: str) -> web.Application:
    app = web.Application(client_max_size=MAX_BODY_BYTES)
    app[GUARD_STATE] = AdlsGuard(upstream=upstream.rstrip("/"), account=account, key_b64=key_b64)
    app.router.add_route("*", "/{tail:.*}", handle)
    forward_through_session(app, app[GUARD_STATE])
    return app


def write_config(path: Path, *, port: int, upstream: str, account: str, key_b64: str) -> None:
    path.write_text(json.dumps({"port": port, "upstream": upstream, "account": account,
                                "key": key_b64}))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m devstack.adls_guard")
    parser.add_argument("--config", type=Path, required=True)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    config = json.loads(args.config.read_text())
    app = create_app(config["upstream"], config["account"], config["key"])
    # No access log: a request's query is its SAS.
    web.run_app(app, host="127.0.0.1", port=int(config["port"]), print=None,
                handle_signals=True, access_log=None)  # fmt: skip


if __name__ == "__main__":
    main()
