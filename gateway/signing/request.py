"""A sign request checked before anything is signed: shape, store address, operation, locations.

Pure functions of the request and of where the table's store is (`StoreAddress`); no I/O. The
rules (docs/signing.md):
- Shape: Iceberg's `S3SignRequest` / `RemoteSignRequest` (`region`, `uri`, `method`,
  `headers` as name -> list of strings, optional `body`, `properties`, `provider`). Header names
  are HTTP tokens, values printable ASCII without CR/LF, bounded in count and size; `provider`,
  when given, is `s3`. Anything else is 400 before a credential is touched.
- Address: the URI's scheme, host and port are the table's S3 endpoint's, and the bucket is read
  in the table's one addressing style (path or virtual host), never guessed both ways, so the
  store reads the bucket the policy checked. Key segments are percent-decoded once; a segment
  that decodes to `.`, `..`, or holds `/`, `\\` or a control character is refused (the store and
  the policy would read different keys).
- Operation: an allowlist mapped to read or write (GET/HEAD object, ListObjectsV2 with a prefix;
  PUT object and part, multipart create/complete/abort, DELETE object, DeleteObjects with its
  body). Headers that name other objects or change permissions (`x-amz-copy-source*`,
  `x-amz-acl`, `x-amz-grant-*`) and chunk-signed payloads are refused.
- Locations: every object key, list prefix or DeleteObjects key must lie inside the table's
  location (on a path-segment boundary; a list prefix strictly inside, ending in `/`).
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote, urlsplit

from gateway.errors import InvalidRequestError, PermissionDeniedError
from gateway.identity import covers, same_location
from gateway.models import AccessMode

METHODS = frozenset({"GET", "HEAD", "PUT", "POST", "DELETE"})
MAX_URI_CHARS = 8192
MAX_HEADERS = 64
MAX_HEADER_CHARS = 8192
MAX_DELETE_BODY_CHARS = 1 << 20
MAX_DELETE_KEYS = 1000  # S3's own DeleteObjects limit
_TOKEN = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]{1,128}$")
_VALUE = re.compile(r"^[\x20-\x7e\t]*$")
_REGION = re.compile(r"^[a-z0-9-]{1,64}$")
FORBIDDEN_HEADERS = ("x-amz-copy-source", "x-amz-acl", "x-amz-grant-")
CHUNK_SIGNED = "STREAMING-AWS4-HMAC-SHA256-PAYLOAD"
LIST_PARAMS = frozenset({"list-type", "prefix", "delimiter", "max-keys", "continuation-token",
                         "start-after", "fetch-owner", "encoding-type"})
OBJECT_READ_PARAMS = frozenset({"versionId", "partNumber"})


@dataclass(frozen=True)
class SignRequest:
    region: str
    uri: str
    method: str
    headers: tuple[tuple[str, tuple[str, ...]], ...]
    body: str | None

    def header(self, name: str) -> str | None:
        lname = name.lower()
        for key, values in self.headers:
            if key.lower() == lname:
                return ", ".join(values)
        return None

    def wire(self) -> dict[str, Any]:
        """The request as the catalog's signer receives it (forwarded signing)."""
        out: dict[str, Any] = {"region": self.region, "uri": self.uri, "method": self.method,
                               "headers": {k: list(v) for k, v in self.headers}}
        if self.body is not None:
            out["body"] = self.body
        return out


@dataclass(frozen=True)
class StoreAddress:
    """Where the table's objects are and how they are addressed (from the load's S3 keys)."""

    scheme: str
    host: str
    port: int | None
    path_style: bool
    region: str

    @classmethod
    def of(cls, config: Mapping[str, str]) -> StoreAddress:
        """From `s3.endpoint`, `s3.path-style-access` and `s3.region` / `client.region`; no
        endpoint means AWS (`s3.<region>.amazonaws.com`, virtual host unless path style)."""
        region = config.get("s3.region") or config.get("client.region") or "us-east-1"
        path_style = config.get("s3.path-style-access", "false").lower() == "true"
        endpoint = config.get("s3.endpoint")
        if not endpoint:
            return cls("https", f"s3.{region}.amazonaws.com", None, path_style, region)
        parts = urlsplit(endpoint)
        return cls(parts.scheme, (parts.hostname or "").lower(), parts.port, path_style, region)


@dataclass(frozen=True)
class SignTarget:
    """What a checked request touches: access needed and the s3:// locations."""

    access: AccessMode
    locations: tuple[str, ...]
    prefix: bool  # a ListObjectsV2 prefix (must lie strictly inside)
    bucket: str


def _bad(message: str) -> InvalidRequestError:
    return InvalidRequestError(message, lakekeeper_type="InvalidSignRequest")


def _string(doc: Mapping[str, Any], name: str, limit: int) -> str:
    value = doc.get(name)
    if not isinstance(value, str) or not value or len(value) > limit:
        raise _bad(f"'{name}' must be a non-empty string of at most {limit} characters")
    return value


def parse_sign_request(doc: Mapping[str, Any]) -> SignRequest:
    """The JSON body as a SignRequest.

    Raises:
        InvalidRequestError: any field missing, mistyped, oversized or carrying injection.
    """
    region = _string(doc, "region", 64)
    if not _REGION.match(region):
        raise _bad("'region' is not a region name")
    uri = _string(doc, "uri", MAX_URI_CHARS)
    if not uri.isascii() or any(c in uri for c in "\r\n\t \x00"):
        raise _bad("'uri' must be ASCII without whitespace (percent-encode the key)")
    method = doc.get("method")
    if method not in METHODS:
        raise _bad("'method' must be one of DELETE, GET, HEAD, POST, PUT")
    provider = doc.get("provider")
    if provider is not None and provider != "s3":
        raise _bad("only the 's3' provider is signed here")
    raw = doc.get("headers")
    if not isinstance(raw, dict) or len(raw) > MAX_HEADERS:
        raise _bad(f"'headers' must be an object of at most {MAX_HEADERS} headers")
    headers: list[tuple[str, tuple[str, ...]]] = []
    seen: set[str] = set()
    total = 0
    for name, values in raw.items():
        if not _TOKEN.match(name) or name.lower() in seen:
            raise _bad("a header name is not an HTTP token (or is repeated)")
        seen.add(name.lower())
        if (not isinstance(values, list) or not values
                or not all(isinstance(v, str) and _VALUE.match(v) for v in values)):
            raise _bad(f"header {name!r} must be a list of printable ASCII strings")
        total += len(name) + sum(len(v) for v in values)
        headers.append((name, tuple(values)))
    if total > MAX_HEADER_CHARS:
        raise _bad("the headers are too large")
    body = doc.get("body")
    if body is not None and (not isinstance(body, str) or len(body) > MAX_DELETE_BODY_CHARS):
        raise _bad("'body' must be a string of at most 1 MiB")
    return SignRequest(region, uri, str(method), tuple(headers), body)


def _key_segments(raw: list[str]) -> list[str]:
    out = []
    for seg in raw:
        dec = unquote(seg, errors="strict")
        if (dec in ("", ".", "..") or "/" in dec or "\\" in dec
                or any(ord(c) < 0x20 or ord(c) == 0x7f for c in dec)):
            raise _bad("the object key has an empty, '.' or '..' segment, an encoded separator "
                       "or a control character")
        out.append(dec)
    return out


def _query(raw: str) -> list[tuple[str, str]]:
    """`a=1&uploads` as pairs (a bare name has an empty value); an empty name is refused."""
    out = []
    for pair in raw.split("&") if raw else []:
        name, _, value = pair.partition("=")
        if not name:
            raise _bad("the URI's query is malformed")
        out.append((unquote(name), unquote(value)))
    return out


def _bucket_and_key(req: SignRequest, store: StoreAddress) -> tuple[str, str, list[tuple[str,
                                                                                          str]]]:
    try:
        parts = urlsplit(req.uri)
        host, port = (parts.hostname or "").lower(), parts.port
    except (ValueError, UnicodeError) as exc:
        raise _bad("'uri' is not a URL") from exc
    if parts.scheme != store.scheme or port != store.port or parts.username or parts.fragment:
        raise PermissionDeniedError("the URI does not address the table's store")
    segments = parts.path.split("/")[1:] if parts.path.startswith("/") else []
    if segments and segments[-1] == "":  # `bucket/` (a bucket request in path style)
        segments = segments[:-1]
    query = _query(parts.query)
    if store.path_style:
        if host != store.host or not segments:
            raise PermissionDeniedError("the URI does not address the table's store")
        bucket, key = unquote(segments[0]), _key_segments(segments[1:])
    else:
        if not host.endswith("." + store.host):
            raise PermissionDeniedError("the URI does not address the table's store")
        bucket, key = host[: -len(store.host) - 1], _key_segments(segments)
    if not bucket or "/" in bucket or "%" in bucket:
        raise _bad("the URI names no valid bucket")
    return bucket, "/".join(key), query


def _delete_keys(body: str | None) -> list[str]:
    if body is None:
        raise _bad("DeleteObjects needs its 'body' to be signed")
    if "<!DOCTYPE" in body or "<!ENTITY" in body:
        raise _bad("the DeleteObjects body must not declare a DTD")
    try:
        root = ET.fromstring(body)  # noqa: S314 - bounded, and DTDs are refused above
    except ET.ParseError as exc:
        raise _bad("the DeleteObjects body is not XML") from exc
    keys = [el.text or "" for el in root.iter() if el.tag.rsplit("}", 1)[-1] == "Key"]
    if not keys or len(keys) > MAX_DELETE_KEYS:
        raise _bad(f"DeleteObjects must name 1 to {MAX_DELETE_KEYS} keys")
    return keys


def _operation(req: SignRequest, key: str, query: list[tuple[str, str]]) -> tuple[AccessMode,
                                                                                 bool]:
    """(access, is_list) of an allowlisted operation."""
    names = {k for k, _ in query}
    if len(names) != len(query):
        raise _bad("a query parameter is repeated")
    m = req.method
    if not key:  # bucket level
        if m == "GET" and names <= LIST_PARAMS and dict(query).get("list-type") == "2" \
                and dict(query).get("prefix"):
            return AccessMode.READ, True
        if m == "POST" and names == {"delete"}:
            return AccessMode.WRITE, False
        raise _bad("this bucket operation is not signed (ListObjectsV2 with a prefix and "
                   "DeleteObjects are)")
    if m in ("GET", "HEAD") and names <= OBJECT_READ_PARAMS:
        return AccessMode.READ, False
    multipart = (
        (m == "PUT" and names in (set(), {"partNumber", "uploadId"}))
        or (m == "POST" and names in ({"uploads"}, {"uploadId"}))
        or (m == "DELETE" and names in (set(), {"uploadId"}, {"versionId"}))
    )
    if multipart:
        return AccessMode.WRITE, False
    raise _bad("this object operation is not signed")


def access_for(req: SignRequest) -> AccessMode:
    """The access a request needs: every signed read is a GET or HEAD, every write is not."""
    return AccessMode.READ if req.method in ("GET", "HEAD") else AccessMode.WRITE


def check_request(req: SignRequest, store: StoreAddress, table_location: str) -> SignTarget:
    """What `req` touches, checked against the table at `table_location` on `store`.

    Raises:
        InvalidRequestError: a shape, operation, header or region the signer refuses (400).
        PermissionDeniedError: another store or bucket, or a location outside the table (403).
    """
    if req.region != store.region:
        raise _bad("the request's region is not the table's")
    for name, _ in req.headers:
        if name.lower().startswith(FORBIDDEN_HEADERS):
            raise _bad(f"header {name!r} is not signed (it names or opens other objects)")
    if (req.header("x-amz-content-sha256") or "").startswith("STREAMING-AWS4-HMAC"):
        raise _bad("chunk-signed payloads need the secret key: not signed remotely")
    bucket, key, query = _bucket_and_key(req, store)
    access, is_list = _operation(req, key, query)
    if is_list:
        locations = [f"s3://{bucket}/{dict(query)['prefix']}"]
    elif not key:
        locations = [f"s3://{bucket}/{k}" for k in _delete_keys(req.body)]
    else:
        locations = [f"s3://{bucket}/{key}"]
    for loc in locations:
        key_part = loc.split("/", 3)[3] if loc.count("/") >= 3 else ""
        if any(seg in (".", "..") for seg in key_part.split("/")):
            raise _bad("a key has a '.' or '..' segment")
        # An object strictly below the table; a list prefix too (S3 matches raw prefixes, so
        # the table's own location as a prefix would also list `<table>_other`).
        strictly = not same_location(table_location, loc) or (is_list and loc.endswith("/"))
        if not covers(table_location, loc) or not strictly:
            raise PermissionDeniedError("the request addresses a location outside the table")
    return SignTarget(access, tuple(locations), is_list, bucket)
