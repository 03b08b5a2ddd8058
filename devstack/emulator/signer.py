"""Lakekeeper's S3 remote signer, the parts that need no table: parse, classify, sign.

Read from Lakekeeper `main` v0.13.1-78-g90892e9cc, `crates/lakekeeper/src/server/s3_signer/sign.rs`
(docs/lakekeeper-fidelity.md item 12):
- The request body is the Iceberg `S3SignRequest` / `RemoteSignRequest`: `region`, `uri`,
  `method`, `headers` (name -> list of values), optional `body` (DeleteObjects only),
  `properties` and `provider` (Iceberg 1.11; accepted, not used).
- The URI's scheme is http or https; bucket and key come from the host (virtual-host style) or
  the first path segment (path style) per the profile's `remote-signing-url-style` (`auto`:
  virtual-host when the host is `<bucket>.<endpoint host>`, else path). Path segments are
  percent-decoded; a decoded segment that is `.` or `..`, or that holds a `/` (`%2F`), is refused.
- GET/HEAD read; PUT/POST write, except `POST ?delete` (DeleteObjects: a body is required and
  every `<Key>` in it is a location to check); DELETE deletes; any other method is 405.
- It signs with SigV4 (`aws_sigv4`: single percent-encoding, no path normalisation), payload
  `UNSIGNED-PAYLOAD`, or the body's SHA-256 when a body was given (so the checked DeleteObjects
  body is bound). `range`, `amz-sdk-invocation-id` and `amz-sdk-retry` are not signed; the
  client's `x-amz-date` is replaced by the signer's own. The answer's `headers` are the
  request's plus the signing headers, and `Cache-Control` (`private` for GET/HEAD, `no-cache`
  otherwise) inside that JSON map.
"""

from __future__ import annotations

import datetime
import enum
import hashlib
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from typing import Any, Literal
from urllib.parse import parse_qsl, unquote, urlsplit

from botocore.auth import SIGV4_TIMESTAMP, UNSIGNED_PAYLOAD, S3SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials
from pydantic import BaseModel, ConfigDict

from devstack.emulator.cloud_vending import storage_type
from devstack.emulator.errors import ApiError

# Lakekeeper's UNSIGNED_HEADERS less `x-amz-date`, which the signer replaces with its own and
# signs (SigV4 needs the date signed).
UNSIGNED_HEADERS = frozenset({"range", "amz-sdk-invocation-id", "amz-sdk-retry"})
MAX_DELETE_BODY = 2 * 1024 * 1024
SIGN_SUFFIX = "v1/aws/s3/sign"


def signing_enabled(profile: dict[str, Any]) -> bool:
    return storage_type(profile) == "s3" and bool(profile.get("remote-signing-enabled", True))


def select_delegation(values: set[str], profile: dict[str, Any]) -> tuple[bool, bool]:
    """(vend, sign) for a load, by Lakekeeper's rule (`s3.rs`): an explicit mechanism is
    honoured when the profile allows it; neither asked (or none possible) -> vend if STS is on,
    else sign if enabled; `client-managed` alone -> neither."""
    want_vend, want_sign = "vended-credentials" in values, "remote-signing" in values
    if "client-managed" in values and not (want_vend or want_sign):
        return False, False
    sts, signs = bool(profile.get("sts-enabled")), signing_enabled(profile)
    if want_vend and want_sign:  # both asked: the server prefers vended credentials
        return (True, False) if sts else (False, signs)
    vend, signed = want_vend and sts, want_sign and signs
    if not (vend or signed):
        return (True, False) if sts else (False, signs)
    return vend, signed


def signer_config(base: str, warehouse_id: str, table_id: str) -> dict[str, str]:
    """The load `config` keys of remote signing, both spellings (`s3.signer.*` for pyiceberg
    and Iceberg < 1.11, `signer.*` for Iceberg >= 1.11)."""
    uri = f"{base}/catalog/"
    endpoint = f"v1/signer/{warehouse_id}/tabular-id/{table_id}/{SIGN_SUFFIX}"
    return {
        "s3.remote-signing-enabled": "true",
        "s3.signer": "S3V4RestSigner",
        "py-io-impl": "pyiceberg.io.fsspec.FsspecFileIO",
        "signer.uri": uri, "s3.signer.uri": uri,
        "signer.endpoint": endpoint, "s3.signer.endpoint": endpoint,
    }  # fmt: skip


class Operation(enum.Enum):
    READ = "read"
    WRITE = "write"
    DELETE = "delete"


class SignRequest(BaseModel):
    """`S3SignRequest` (Iceberg's AWS signer spec) = `RemoteSignRequest` (REST spec 1.11)."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    region: str
    uri: str
    method: Literal["PUT", "GET", "HEAD", "POST", "DELETE", "PATCH", "OPTIONS"]
    headers: dict[str, list[str]]
    body: str | None = None
    properties: dict[str, str] | None = None
    provider: str | None = None


@dataclass(frozen=True)
class S3Target:
    """What a sign request addresses: the bucket and the decoded key (empty: the bucket)."""

    bucket: str
    key: str
    query: tuple[tuple[str, str], ...]

    def location(self, key: str | None = None) -> str:
        return f"s3://{self.bucket}/{self.key if key is None else key}"


def _bad(kind: str, message: str) -> ApiError:
    return ApiError(400, kind, message)


def _decoded_segments(raw: list[str]) -> list[str]:
    out = []
    for seg in raw:
        dec = unquote(seg)
        if dec in (".", "..") or "/" in dec or "\\" in dec:
            raise _bad("InvalidS3Url", "S3 URI path holds a '.' or '..' segment or an encoded '/'")
        out.append(dec)
    return out


def parse_s3_url(uri: str, profile: dict[str, Any]) -> S3Target:
    """Bucket, key and query of `uri` as the profile's URL style reads them."""
    try:
        parts = urlsplit(uri)
        host = parts.hostname or ""
    except ValueError as exc:
        raise _bad("InvalidS3Url", "S3 URI is not a valid URL") from exc
    if parts.scheme not in ("http", "https") or not host:
        raise _bad("InvalidS3Url", "S3 URI scheme must be http or https")
    style = str(profile.get("remote-signing-url-style") or profile.get("s3-url-detection-mode")
                or "auto")
    endpoint_host = urlsplit(str(profile.get("endpoint") or "")).hostname or ""
    segments = parts.path.split("/")[1:] if parts.path.startswith("/") else []
    query = tuple(parse_qsl(parts.query, keep_blank_values=True))
    virtual = style == "virtual_host" or (
        style == "auto" and endpoint_host != "" and host.endswith("." + endpoint_host))
    if virtual:
        bucket = host[: -len(endpoint_host) - 1] if endpoint_host else host.split(".", 1)[0]
        return S3Target(bucket, "/".join(_decoded_segments(segments)), query)
    if not segments or segments[0] == "":
        raise _bad("InvalidS3Url", "S3 URI names no bucket")
    bucket = unquote(segments[0])
    return S3Target(bucket, "/".join(_decoded_segments(segments[1:])), query)


def operation_of(method: str, query: tuple[tuple[str, str], ...]) -> Operation:
    if method in ("GET", "HEAD"):
        return Operation.READ
    if method == "POST" and any(k == "delete" for k, _ in query):
        return Operation.DELETE
    if method in ("PUT", "POST"):
        return Operation.WRITE
    if method == "DELETE":
        return Operation.DELETE
    raise ApiError(405, "MethodNotAllowed", f"Method {method} cannot be signed")


def delete_keys(body: str | None) -> list[str]:
    """The `<Key>`s of a DeleteObjects body (required: 400 DeleteWithoutBody)."""
    if body is None:
        raise _bad("DeleteWithoutBody", "DeleteObjects needs the request body to be signed")
    if len(body) > MAX_DELETE_BODY:
        raise ApiError(413, "PayloadTooLarge", "DeleteObjects body is too large")
    try:
        root = ET.fromstring(body)  # noqa: S314 - a bounded body, no entity expansion in 3.11
    except ET.ParseError as exc:
        raise _bad("InvalidDeleteBody", "DeleteObjects body is not valid XML") from exc
    keys = [el.text or "" for el in root.iter() if el.tag.rsplit("}", 1)[-1] == "Key"]
    if not keys:
        raise _bad("InvalidDeleteBody", "DeleteObjects body names no key")
    return keys


class _Signer(S3SigV4Auth):
    """botocore's S3 SigV4 with Lakekeeper's payload and unsigned-header rules and a given time."""

    def __init__(self, credentials: Credentials, region: str, payload_hash: str,
                 unsigned: frozenset[str], when: datetime.datetime) -> None:
        super().__init__(credentials, "s3", region)
        self._payload_hash = payload_hash
        self._unsigned = unsigned
        self._when = when

    def payload(self, request: Any) -> str:
        return self._payload_hash

    def headers_to_sign(self, request: Any) -> Any:
        headers = super().headers_to_sign(request)
        for name in list(headers.keys()):
            if name.lower() in self._unsigned:
                del headers[name]
        return headers

    def add_auth(self, request: Any) -> None:
        request.context["timestamp"] = self._when.strftime(SIGV4_TIMESTAMP)
        self._modify_request_before_signing(request)
        canonical = self.canonical_request(request)
        signature = self.signature(self.string_to_sign(request, canonical), request)
        self._inject_signature_to_request(request, signature)


def sign(req: SignRequest, access_key: str, secret_key: str, token: str | None,
         when: datetime.datetime) -> dict[str, list[str]]:
    """The answer's `headers`: the request's plus the SigV4 headers and Cache-Control."""
    payload = hashlib.sha256(req.body.encode()).hexdigest() if req.body is not None \
        else UNSIGNED_PAYLOAD
    aws = AWSRequest(method=req.method, url=req.uri,
                     headers={k: ", ".join(v) for k, v in req.headers.items()})
    _Signer(Credentials(access_key, secret_key, token), req.region, payload, UNSIGNED_HEADERS,
            when).add_auth(aws)
    out = {k: list(v) for k, v in req.headers.items()}
    for name in ("Authorization", "X-Amz-Date", "X-Amz-Content-SHA256", "X-Amz-Security-Token"):
        if name in aws.headers:
            out = {k: v for k, v in out.items() if k.lower() != name.lower()}
            out[name.lower()] = [str(aws.headers[name])]
    out["Cache-Control"] = ["private" if req.method in ("GET", "HEAD") else "no-cache"]
    return out

