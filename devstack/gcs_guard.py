"""The token-checking layer in front of fake-gcs-server (which checks no credentials at all).

A request passes only with `Authorization: Bearer <token>` where the token is one the catalog
emulator vended (devstack/emulator/gcs_tokens.py: HMAC-signed with the warehouse's
service-account key), unexpired, for the bucket, every object it names under the token's table
prefix, and a method its role allows (read: get, list; write: also upload, delete, copy).
That is what Google enforces for Lakekeeper's downscoped tokens (a CEL condition on the prefix,
objectViewer / objectUser); refusals are Google's: 401 without a valid token, 403 outside the
grant. Allowed JSON-API requests are proxied as they are: the raw path the guard decided on,
byte for byte (a URL library would remove a `..` segment, and the object the store is asked for
would not be the one checked); a name or prefix with a `.` or `..` segment is refused outright
(400), whichever way it was encoded. XML-API requests (which fake-gcs-server does not serve) are
served on its JSON API by devstack/gcs_xml.py. A JSON-API batch (`POST /batch/storage/v1`, as the
GCS connector sends a rename's copies and deletes) is split (devstack/gcs_batch.py): every part is
checked by the same rules as a single request (its own bearer token, or the batch's), the whole
batch is refused if any part is, and the parts are then forwarded one by one, byte for byte.

Run: `python -m devstack.gcs_guard --config guard.json` (`port`, `upstream`, `keys`: the hex
signing keys of the warehouses it serves).
"""

from __future__ import annotations

import argparse
import gzip
import json
import logging
import secrets
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import unquote

import aiohttp
from aiohttp import web
from yarl import URL

from devstack.emulator.gcs_tokens import TokenGrant, verify
from devstack.gcs_batch import BatchError, BatchPart, PartAnswer, batch_response, parse_batch
from devstack.gcs_xml import MultipartUploads, XmlApi, XmlError, copy_source, error_response
from devstack.guard_upstream import forward_through_session

MAX_BODY_BYTES = 512 * 1024 * 1024
MAX_UPLOAD_SESSIONS = 10_000  # resumable sessions remembered (oldest forgotten first)
_HOP_HEADERS = frozenset({"host", "authorization", "content-length", "transfer-encoding",
                          "connection", "keep-alive"})  # fmt: skip
LOG = logging.getLogger("devstack.gcs_guard")
GUARD_STATE: web.AppKey[GuardState] = web.AppKey("gcs_guard")


class Refused(Exception):
    def __init__(self, status: int, reason: str) -> None:
        super().__init__(reason)
        self.status = status
        self.reason = reason


@dataclass(frozen=True)
class Access:
    """What one request does: `objects` it names (None: a bucket-level call) and whether it
    writes. `prefix` is a list call's prefix."""

    bucket: str
    objects: tuple[str, ...] = ()
    prefix: str | None = None
    writes: bool = False


def _dot_segment(name: str) -> bool:
    """Whether an object name or prefix has a `.` or `..` segment (a path resolver would move
    it to another object than the one named)."""
    return any(part in (".", "..") for part in name.split("/"))


def _within(name: str, prefix: str) -> bool:
    prefix = prefix.strip("/")
    return name == prefix or name.startswith(prefix + "/")


def _multipart_name(body: bytes, content_type: str) -> str | None:
    """The object name in a `multipart/related` upload's JSON metadata part."""
    marker = "boundary="
    if marker not in content_type:
        return None
    boundary = content_type.split(marker, 1)[1].split(";", 1)[0].strip('"')
    for part in body.split(b"--" + boundary.encode()):
        # Parts separate headers from payload with a blank line (CRLF or, as gcsfs sends, LF).
        normal = part.replace(b"\r\n", b"\n")
        head, sep, payload = normal.lstrip(b"\n").partition(b"\n\n")
        if sep and b"json" in head.lower():
            try:
                name = json.loads(payload.strip().decode())["name"]
            except (ValueError, KeyError, TypeError, UnicodeDecodeError):
                return None
            return str(name)
    return None


def is_xml_api(path: str) -> bool:
    """An XML-API request (`/<bucket>[/<object>]`), not a JSON-API one."""
    first = path.lstrip("/").split("/", 1)[0]
    return first not in ("storage", "upload", "download", "batch")


def classify(method: str, path: str, query: dict[str, str], body: bytes,
             content_type: str, copy_from: str | None = None) -> Access:  # fmt: skip
    """Which bucket and objects a GCS JSON- or XML-API request touches (`copy_from`: an XML
    copy's `x-goog-copy-source`).

    Raises:
        Refused: a request shape this layer does not know (refused, never passed unchecked).
    """
    parts = [unquote(p) for p in path.strip("/").split("/")]
    writes = method not in ("GET", "HEAD")
    if parts[:1] == ["download"]:
        parts = parts[1:]
    if parts[:3] == ["upload", "storage", "v1"] and len(parts) >= 5 and parts[3] == "b":
        bucket = parts[4]
        name = query.get("name")
        if name is None and query.get("uploadType") == "multipart":
            name = _multipart_name(body, content_type)
        if name is None and query.get("uploadType") == "resumable" and body:
            try:
                name = str(json.loads(body)["name"])
            except (ValueError, KeyError, TypeError):
                name = None
        if name is None and "upload_id" in query:
            return Access(bucket=bucket, writes=True, objects=(f"\0upload:{query['upload_id']}",))
        if name is None:
            raise Refused(400, "upload without an object name")
        return Access(bucket=bucket, objects=(name,), writes=True)
    if parts[:2] == ["storage", "v1"] and len(parts) >= 4 and parts[2] == "b":
        bucket = parts[3]
        rest = parts[4:]
        if not rest:
            return Access(bucket=bucket, writes=writes)  # bucket metadata
        if rest[0] != "o":
            raise Refused(403, f"bucket call {rest[0]!r} is not allowed")
        if len(rest) == 1:
            if method == "GET":
                return Access(bucket=bucket, prefix=query.get("prefix", ""))
            raise Refused(403, "object insert goes through /upload")
        # o/<name...>[/(copyTo|rewriteTo)/b/<bucket>/o/<name...>] or o/<name>/compose
        joined = "/".join(rest[1:])
        for verb in ("/rewriteTo/b/", "/copyTo/b/"):
            if verb in joined:
                src, _, dst = joined.partition(verb)
                dst_bucket, _, dst_name = dst.partition("/o/")
                if dst_bucket != bucket:
                    raise Refused(403, "copies across buckets are not allowed")
                return Access(bucket=bucket, objects=(src, dst_name), writes=True)
        if "/moveTo/o/" in joined:  # objects.move: both names are checked
            src, _, dst_name = joined.partition("/moveTo/o/")
            return Access(bucket=bucket, objects=(src, dst_name), writes=True)
        if joined.endswith("/compose"):
            try:
                sources = [str(s["name"]) for s in json.loads(body)["sourceObjects"]]
            except (ValueError, KeyError, TypeError) as exc:
                raise Refused(400, "compose without source objects") from exc
            return Access(bucket=bucket, objects=(joined[: -len("/compose")], *sources),
                          writes=True)  # fmt: skip
        return Access(bucket=bucket, objects=(joined,), writes=writes)
    # XML API: /<bucket>[/<object...>]
    if parts and parts[0]:
        bucket, name = parts[0], "/".join(parts[1:])
        if not name:
            if method == "GET":
                return Access(bucket=bucket, prefix=query.get("prefix", ""))
            raise Refused(403, "bucket-level XML call is not allowed")
        if copy_from is not None and method == "PUT":
            src_bucket, src_name = copy_source(copy_from)
            if src_bucket != bucket:
                raise Refused(403, "copies across buckets are not allowed")
            return Access(bucket=bucket, objects=(src_name, name), writes=True)
        return Access(bucket=bucket, objects=(name,), writes=writes)
    raise Refused(404, "unknown request")


@dataclass
class GuardState:
    """The keys the guard accepts, the upstream, and the resumable uploads it authorised."""

    upstream: str
    keys: tuple[bytes, ...]
    now_ms: Callable[[], int] = field(default=lambda: int(time.time() * 1000))
    # resumable upload id -> (bucket, object) its start was allowed for
    uploads: OrderedDict[str, tuple[str, str]] = field(default_factory=OrderedDict)
    refused: int = 0
    session: aiohttp.ClientSession | None = None
    multipart: MultipartUploads = field(default_factory=MultipartUploads)

    def grant(self, header: str | None) -> TokenGrant:
        if not header or not header.startswith("Bearer "):
            raise Refused(401, "no bearer token")
        token = header[len("Bearer ") :].strip()
        for key in self.keys:
            grant = verify(token, key)
            if grant is not None:
                if grant.expires_at_ms <= self.now_ms():
                    raise Refused(401, "token expired")
                return grant
        raise Refused(401, "invalid token")

    def check(self, grant: TokenGrant, access: Access) -> None:
        if access.bucket != grant.bucket:
            raise Refused(403, "bucket outside the token's grant")
        if access.writes and grant.role != "write":
            raise Refused(403, "the token's role does not allow writes")
        names = list(access.objects)
        if any(_dot_segment(n) for n in names) or (access.prefix is not None
                                                  and _dot_segment(access.prefix)):
            raise Refused(400, "an object name with a '.' or '..' segment")
        for i, name in enumerate(names):
            if name.startswith("\0upload:"):
                known = self.uploads.get(name[len("\0upload:") :])
                if known is None or known[0] != access.bucket:
                    raise Refused(403, "unknown upload session")
                names[i] = known[1]
        if access.prefix is not None and not _within(access.prefix.rstrip("/") or "", grant.prefix):
            raise Refused(403, "list outside the token's prefix")
        if not access.objects and access.prefix is None and access.writes:
            raise Refused(403, "bucket changes are not allowed")
        for name in names:
            if not _within(name, grant.prefix):
                raise Refused(403, "object outside the token's prefix")


def _log_refusal(method: str, path: str, exc: Refused) -> None:
    """One line per refusal on the guard's log (the path and reason; never the token)."""
    LOG.warning("refused %s %s: %d %s", method, path, exc.status, exc.reason)


def _error(status: int, reason: str, *, xml: bool = False, head: bool = False) -> web.Response:
    if xml:
        return error_response(status, reason, head=head)
    body = {"error": {"code": status, "message": reason, "errors": [{"message": reason}]}}
    return web.json_response(body, status=status)


async def handle(request: web.Request) -> web.StreamResponse:
    state = request.app[GUARD_STATE]
    body = await request.read()
    query = dict(request.query)
    path = request.rel_url.raw_path  # still encoded: each name is decoded once, as the store does
    if path.rstrip("/") == "/batch/storage/v1":
        return await _handle_batch(state, request, body)
    xml = is_xml_api(path)
    try:
        grant = state.grant(request.headers.get("Authorization"))
        access = classify(request.method, path, query, body,
                          request.headers.get("Content-Type", ""),
                          request.headers.get("x-goog-copy-source") if xml else None)  # fmt: skip
        state.check(grant, access)
    except XmlError as exc:
        state.refused += 1
        return error_response(exc.status, exc.message, exc.code, head=request.method == "HEAD")
    except Refused as exc:
        state.refused += 1
        _log_refusal(request.method, path, exc)
        return _error(exc.status, exc.reason, xml=xml, head=request.method == "HEAD")
    assert state.session is not None
    if xml:
        return await XmlApi(state.upstream, state.multipart).handle(state.session, request, body)
    headers = {k: v for k, v in request.headers.items() if k.lower() not in _HOP_HEADERS}
    # The raw target the decision was made on, not yarl's normalised one (module docstring).
    target = URL(state.upstream + request.raw_path, encoded=True)
    if request.method == "POST" and access.writes and len(access.objects) == 2:
        body = _plain_copy_body(body, headers)
    async with state.session.request(
        request.method, target, data=body, headers=headers, allow_redirects=False,
    ) as answer:  # fmt: skip
        payload = await answer.read()
        out_headers = {k: v for k, v in answer.headers.items()
                       if k.lower() not in _HOP_HEADERS and k.lower() != "content-encoding"}
        _remember_upload(state, access, query, out_headers)
        return web.Response(status=answer.status, body=payload, headers=out_headers)


def _check_part(state: GuardState, part: BatchPart, outer_auth: str | None) -> None:
    """One batch part, by a single request's rules (only object calls: no uploads, no batches)."""
    path = part.raw_path.split("?", 1)[0]
    if not path.startswith("/storage/v1/"):
        raise Refused(403, "a batch part must be a /storage/v1 call")
    own = next((v for k, v in part.headers.items() if k.lower() == "authorization"), None)
    grant = state.grant(own if own is not None else outer_auth)
    content_type = next((v for k, v in part.headers.items() if k.lower() == "content-type"), "")
    state.check(grant, classify(part.method, path, part.query, part.body, content_type))


async def _handle_batch(state: GuardState, request: web.Request, body: bytes) -> web.Response:
    """A batch: every part checked first (one refusal refuses all), then each forwarded."""
    try:
        if request.method != "POST":
            raise Refused(405, "a batch is a POST")
        try:
            parts = parse_batch(body, request.headers.get("Content-Type", ""))
        except BatchError as exc:
            raise Refused(400, str(exc)) from exc
        outer = request.headers.get("Authorization")
        if not parts:
            state.grant(outer)
        for part in parts:
            _check_part(state, part, outer)
    except Refused as exc:
        state.refused += 1
        _log_refusal("POST", "/batch/storage/v1", exc)
        return _error(exc.status, exc.reason)
    assert state.session is not None
    answers: list[PartAnswer] = []
    for part in parts:
        headers = {k: v for k, v in part.headers.items() if k.lower() not in _HOP_HEADERS}
        target = URL(state.upstream + part.raw_path, encoded=True)
        async with state.session.request(
            part.method, target, data=part.body, headers=headers, allow_redirects=False,
        ) as answer:  # fmt: skip
            payload = await answer.read()
            out_headers = {k: v for k, v in answer.headers.items()
                           if k.lower() not in _HOP_HEADERS and k.lower() != "content-encoding"}
        answers.append(PartAnswer(part.content_id, answer.status, out_headers, payload))
    boundary = f"batch_{secrets.token_hex(8)}"
    content_type = f"multipart/mixed; boundary={boundary}"
    return web.Response(body=batch_response(answers, boundary),
                        headers={"Content-Type": content_type})  # fmt: skip


def _plain_copy_body(body: bytes, headers: dict[str, str]) -> bytes:
    """A copy, rewrite or move's metadata body as fake-gcs-server can read it: the GCS
    connector sends it gzip-encoded (GCS accepts that; fake-gcs-server decodes it as JSON and
    fails, 500) and possibly empty (GCS: no metadata changes)."""
    encoding = next((k for k in headers if k.lower() == "content-encoding"), None)
    if encoding is not None and headers[encoding].lower() == "gzip":
        del headers[encoding]
        body = gzip.decompress(body) if body else b""
    if not body.strip():
        body = b"{}"
        for key in [k for k in headers if k.lower() == "content-type"]:
            del headers[key]
        headers["Content-Type"] = "application/json"
    return body


def _remember_upload(state: GuardState, access: Access, query: dict[str, str],
                     headers: dict[str, str]) -> None:  # fmt: skip
    """A resumable upload's session id, bound to the object its start was allowed for."""
    location = headers.get("Location") or headers.get("location")
    if query.get("uploadType") != "resumable" or not location or "upload_id=" not in location:
        return
    upload_id = unquote(location.split("upload_id=", 1)[1].split("&", 1)[0])
    if access.objects and not access.objects[0].startswith("\0"):
        state.uploads[upload_id] = (access.bucket, access.objects[0])
        while len(state.uploads) > MAX_UPLOAD_SESSIONS:
            state.uploads.popitem(last=False)


def create_app(upstream: str, keys: Iterable[bytes]) -> web.Application:
    app = web.Application(client_max_size=MAX_BODY_BYTES)
    app[GUARD_STATE] = GuardState(upstream=upstream.rstrip("/"), keys=tuple(keys))
    app.router.add_route("*", "/{tail:.*}", handle)
    forward_through_session(app, app[GUARD_STATE])
    return app


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m devstack.gcs_guard")
    parser.add_argument("--config", type=Path, required=True)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(message)s")
    config = json.loads(args.config.read_text())
    app = create_app(config["upstream"], [bytes.fromhex(k) for k in config["keys"]])
    web.run_app(app, host="127.0.0.1", port=int(config["port"]), print=None,
                handle_signals=True)  # fmt: skip


if __name__ == "__main__":
    main()
