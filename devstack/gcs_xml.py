"""GCS's XML API, served on fake-gcs-server's JSON API (which the dev stack's GCS stand-in lacks).

Real GCS serves both APIs; object_store (Lance) writes and lists through the XML one only:
`PUT /<bucket>/<object>` (with `x-goog-if-generation-match`), `x-goog-copy-source` copies, XML
multipart uploads (`POST ?uploads`, `PUT ?partNumber=&uploadId=`, `POST ?uploadId=`,
`DELETE ?uploadId=`) and ListObjectsV2 (`GET /<bucket>?list-type=2`). fake-gcs-server answers
the first with 400 "invalid uploadType", does not know the multipart calls, ignores
preconditions on media uploads, copies and deletes, and its XML list ignores `max-keys`,
`start-after` and `continuation-token`. Each call is translated here to the JSON call with the
same meaning:

- an upload (and a copy's write) becomes one JSON multipart upload carrying `ifGenerationMatch`
  / `ifGenerationNotMatch`, which fake-gcs-server checks atomically with the write (412 fails);
- a multipart upload's parts are held here, invisible, and written as one object only by the
  completion, which checks GCS's rules (parts listed in ascending order, each ETag matching,
  every part but the last at least 5 MiB);
- a list becomes a JSON list (paginated, `start-after` exclusive);
- a download is fake-gcs-server's own (`/download/...`), with `If-Match`, `If-None-Match`,
  `x-goog-if-generation-match` evaluated on the object it returns.

A precondition this layer cannot make atomic (on a delete, a metageneration) is refused with
501, never ignored. Errors have GCS's XML shape (`<Error><Code>...`).
"""

from __future__ import annotations

import base64
import hashlib
import itertools
import json
import secrets
import xml.etree.ElementTree as ET
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass, field
from urllib.parse import quote, unquote
from xml.sax.saxutils import escape

import aiohttp
from aiohttp import web

MIN_PART_BYTES = 5 * 1024 * 1024  # GCS: every part but the last
MAX_PART_NUMBER = 10_000
MAX_MULTIPART_UPLOADS = 1_000  # sessions held (oldest forgotten first)
MAX_MULTIPART_BYTES = 1024 * 1024 * 1024  # part bytes held across all sessions
MAX_COMPLETE_BODY_BYTES = 1024 * 1024
MAX_LIST_KEYS = 1000
_XML = "application/xml; charset=UTF-8"
_PRECONDITION_FAILED = "At least one of the pre-conditions you specified did not hold."
_GENERATION_MATCH = "x-goog-if-generation-match"
_GENERATION_NOT_MATCH = "x-goog-if-generation-not-match"
# Conditions GCS takes that this layer cannot make atomic on fake-gcs-server: refused, not ignored.
_UNSUPPORTED_WRITE_CONDITIONS = ("x-goog-if-metageneration-match",
                                 "x-goog-if-metageneration-not-match", "if-match", "if-none-match",
                                 "if-modified-since", "if-unmodified-since",
                                 "x-goog-copy-source-if-generation-match",
                                 "x-goog-copy-source-if-match",
                                 "x-goog-copy-source-if-none-match",
                                 "x-goog-copy-source-if-modified-since",
                                 "x-goog-copy-source-if-unmodified-since")  # fmt: skip
_ATTRIBUTE_HEADERS = {"content-type": "contentType", "cache-control": "cacheControl",
                      "content-disposition": "contentDisposition",
                      "content-encoding": "contentEncoding",
                      "content-language": "contentLanguage"}  # fmt: skip
_ERROR_CODES = {400: "InvalidArgument", 401: "AuthenticationRequired", 403: "AccessDenied",
                404: "NoSuchKey", 409: "Conflict", 412: "PreconditionFailed",
                416: "InvalidRange", 429: "SlowDown", 501: "NotImplemented",
                503: "ServiceUnavailable"}  # fmt: skip


class XmlError(Exception):
    """A refusal in GCS's XML error shape."""

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message


def error_response(status: int, message: str, code: str | None = None, *, head: bool = False
                   ) -> web.Response:  # fmt: skip
    """GCS's XML error: `<Error><Code>..</Code><Message>..</Message></Error>` (no body on HEAD)."""
    code = code or _ERROR_CODES.get(status, "InternalError")
    body = (f"<?xml version='1.0' encoding='UTF-8'?><Error><Code>{escape(code)}</Code>"
            f"<Message>{escape(message)}</Message></Error>")  # fmt: skip
    quiet = head or status == 304
    return web.Response(status=status, body=b"" if quiet else body.encode(),
                        headers={"Content-Type": _XML})  # fmt: skip


def _xml(body: str, headers: Mapping[str, str] | None = None) -> web.Response:
    text = "<?xml version='1.0' encoding='UTF-8'?>" + body
    return web.Response(body=text.encode(), headers={"Content-Type": _XML, **(headers or {})})


@dataclass(frozen=True)
class Conditions:
    """Generation preconditions of a write (`None`: not given)."""

    generation_match: int | None = None
    generation_not_match: int | None = None

    @classmethod
    def from_headers(cls, headers: Mapping[str, str]) -> Conditions:
        """Raises: XmlError (400 not a number, 501 a condition this layer cannot enforce)."""
        for name in _UNSUPPORTED_WRITE_CONDITIONS:
            if name in headers:
                raise XmlError(501, "NotImplemented",
                               f"{name} is not supported by the local GCS stand-in")  # fmt: skip
        return cls(_int_header(headers, _GENERATION_MATCH),
                   _int_header(headers, _GENERATION_NOT_MATCH))  # fmt: skip

    def query(self) -> dict[str, str]:
        params = {}
        if self.generation_match is not None:
            params["ifGenerationMatch"] = str(self.generation_match)
        if self.generation_not_match is not None:
            params["ifGenerationNotMatch"] = str(self.generation_not_match)
        return params

    def or_else(self, other: Conditions) -> Conditions:
        return self if self.query() else other


def _int_header(headers: Mapping[str, str], name: str) -> int | None:
    value = headers.get(name)
    if value is None:
        return None
    try:
        return int(value)
    except ValueError as exc:
        raise XmlError(400, "InvalidArgument", f"{name} is not a generation number") from exc


@dataclass
class Part:
    data: bytes
    etag: str  # quoted MD5 hex, as GCS answers a part upload


@dataclass
class MultipartUpload:
    """One XML multipart upload: where it goes, its attributes and conditions, its parts so far."""

    bucket: str
    name: str
    attributes: dict[str, object]
    conditions: Conditions
    parts: dict[int, Part] = field(default_factory=dict)

    @property
    def size(self) -> int:
        return sum(len(p.data) for p in self.parts.values())


class MultipartUploads:
    """The multipart uploads in progress, bounded in count and bytes (a dev-stack limit)."""

    def __init__(self, max_uploads: int = MAX_MULTIPART_UPLOADS,
                 max_bytes: int = MAX_MULTIPART_BYTES) -> None:  # fmt: skip
        self._uploads: OrderedDict[str, MultipartUpload] = OrderedDict()
        self._max_uploads = max_uploads
        self._max_bytes = max_bytes

    def start(self, upload: MultipartUpload) -> str:
        upload_id = secrets.token_urlsafe(24)
        self._uploads[upload_id] = upload
        while len(self._uploads) > self._max_uploads:
            self._uploads.popitem(last=False)
        return upload_id

    def get(self, upload_id: str, bucket: str, name: str) -> MultipartUpload:
        """Raises: XmlError 404 NoSuchUpload (unknown, or started for another object)."""
        upload = self._uploads.get(upload_id)
        if upload is None or (upload.bucket, upload.name) != (bucket, name):
            raise XmlError(404, "NoSuchUpload", "The requested upload was not found.")
        return upload

    def put_part(self, upload: MultipartUpload, number: int, data: bytes) -> str:
        """Store (or replace) part `number`; its quoted MD5 is the part's ETag."""
        held = sum(u.size for u in self._uploads.values())
        replaced = len(upload.parts[number].data) if number in upload.parts else 0
        if held - replaced + len(data) > self._max_bytes:
            raise XmlError(503, "ServiceUnavailable",
                           "the local GCS stand-in holds too many multipart bytes")  # fmt: skip
        etag = f'"{hashlib.md5(data, usedforsecurity=False).hexdigest()}"'
        upload.parts[number] = Part(data, etag)
        return etag

    def pop(self, upload_id: str) -> MultipartUpload | None:
        return self._uploads.pop(upload_id, None)

    def restore(self, upload_id: str, upload: MultipartUpload) -> None:
        self._uploads[upload_id] = upload

    def __len__(self) -> int:
        return len(self._uploads)


def parse_complete(body: bytes) -> list[tuple[int, str]]:
    """The (part number, ETag) list of a `CompleteMultipartUpload` body.

    Raises:
        XmlError: 400 MalformedXML.
    """
    if len(body) > MAX_COMPLETE_BODY_BYTES:
        raise XmlError(400, "MalformedXML", "the completion body is too large")
    try:
        root = ET.fromstring(body)  # noqa: S314 - bounded, from an authenticated caller
    except ET.ParseError as exc:
        raise XmlError(400, "MalformedXML", "the completion body is not XML") from exc
    parts = []
    for element in root.iter():
        if element.tag.rsplit("}", 1)[-1] != "Part":
            continue
        fields = {child.tag.rsplit("}", 1)[-1]: (child.text or "").strip() for child in element}
        try:
            parts.append((int(fields["PartNumber"]), fields["ETag"]))
        except (KeyError, ValueError) as exc:
            raise XmlError(400, "MalformedXML", "a part lacks PartNumber or ETag") from exc
    if not parts:
        raise XmlError(400, "MalformedXML", "the completion lists no parts")
    return parts


def assemble(upload: MultipartUpload, listed: list[tuple[int, str]]) -> bytes:
    """The object's bytes: the listed parts in order, checked as GCS checks them.

    Raises:
        XmlError: 400 InvalidPartOrder, InvalidPart or EntityTooSmall.
    """
    numbers = [n for n, _ in listed]
    if any(b <= a for a, b in itertools.pairwise(numbers)):
        raise XmlError(400, "InvalidPartOrder", "The list of parts was not in ascending order.")
    chunks = []
    for i, (number, etag) in enumerate(listed):
        part = upload.parts.get(number)
        if part is None or part.etag.strip('"') != etag.strip('"'):
            raise XmlError(400, "InvalidPart", f"part {number} was not uploaded with that ETag")
        if i < len(listed) - 1 and len(part.data) < MIN_PART_BYTES:
            raise XmlError(400, "EntityTooSmall", f"part {number} is smaller than 5 MiB")
        chunks.append(part.data)
    return b"".join(chunks)


def _attributes(headers: Mapping[str, str]) -> dict[str, object]:
    """The JSON API's object resource fields named by an XML request's headers."""
    resource: dict[str, object] = {}
    for header, key in _ATTRIBUTE_HEADERS.items():
        if header in headers:
            resource[key] = headers[header]
    metadata = {k[len("x-goog-meta-") :]: v for k, v in headers.items()
                if k.startswith("x-goog-meta-")}  # fmt: skip
    if metadata:
        resource["metadata"] = metadata
    return resource


def _lower(headers: Mapping[str, str]) -> dict[str, str]:
    return {k.lower(): v for k, v in headers.items()}


def _object_headers(resource: Mapping[str, object]) -> dict[str, str]:
    """The headers GCS's XML API answers a write with, from the JSON object resource."""
    headers = {
        "ETag": f'"{resource.get("etag", "")}"',
        "x-goog-generation": str(resource.get("generation", "")),
        "x-goog-metageneration": str(resource.get("metageneration", "1")),
        "x-goog-stored-content-length": str(resource.get("size", "0")),
        "x-goog-stored-content-encoding": str(resource.get("contentEncoding") or "identity"),
    }
    if resource.get("crc32c") and resource.get("md5Hash"):
        headers["x-goog-hash"] = f"crc32c={resource['crc32c']},md5={resource['md5Hash']}"
    return headers


class XmlApi:
    """Serves one XML-API request (already authorised by the guard) on the JSON API upstream."""

    def __init__(self, upstream: str, uploads: MultipartUploads) -> None:
        self._upstream = upstream.rstrip("/")
        self._uploads = uploads

    async def handle(self, session: aiohttp.ClientSession, request: web.Request, body: bytes
                     ) -> web.Response:  # fmt: skip
        head = request.method == "HEAD"
        try:
            return await self._dispatch(session, request, body)
        except XmlError as exc:
            return error_response(exc.status, exc.message, exc.code, head=head)

    async def _dispatch(self, session: aiohttp.ClientSession, request: web.Request, body: bytes
                        ) -> web.Response:  # fmt: skip
        # The encoded path, each segment decoded once (as the guard checked it and GCS reads it).
        parts = [unquote(p) for p in request.rel_url.raw_path.strip("/").split("/")]
        bucket, name = parts[0], "/".join(parts[1:])
        query = request.query
        headers = _lower(request.headers)
        method = request.method
        if not name:
            if method == "GET":
                return await self._list(session, bucket, query)
            raise XmlError(501, "NotImplemented", "bucket-level XML calls are not served")
        if method in ("GET", "HEAD") and "uploadId" not in query:
            return await self._download(session, request, bucket, name, headers)
        if method == "PUT" and "uploadId" in query:
            return self._put_part(bucket, name, query, body)
        if method == "PUT" and "x-goog-copy-source" in headers:
            return await self._copy(session, bucket, name, headers)
        if method == "PUT":
            resource = await self._write(session, bucket, name, body, _attributes(headers),
                                         Conditions.from_headers(headers))  # fmt: skip
            return web.Response(headers=_object_headers(resource))
        if method == "POST" and "uploads" in query:
            return self._initiate(bucket, name, headers)
        if method == "POST" and "uploadId" in query:
            return await self._complete(session, bucket, name, query["uploadId"], headers, body)
        if method == "DELETE" and "uploadId" in query:
            self._uploads.get(query["uploadId"], bucket, name)
            self._uploads.pop(query["uploadId"])
            return web.Response(status=204)
        if method == "DELETE":
            return await self._delete(session, bucket, name, headers)
        raise XmlError(501, "NotImplemented", f"{method} with this query is not served")

    async def _write(self, session: aiohttp.ClientSession, bucket: str, name: str, data: bytes,
                     resource: dict[str, object], conditions: Conditions
                     ) -> dict[str, object]:  # fmt: skip
        """One JSON multipart upload; its preconditions are checked with the write itself."""
        boundary = secrets.token_hex(16)
        content_type = str(resource.get("contentType") or "application/octet-stream")
        meta = json.dumps({**resource, "name": name, "contentType": content_type})
        payload = b"".join([
            f"--{boundary}\r\nContent-Type: application/json; charset=UTF-8\r\n\r\n".encode(),
            meta.encode(), f"\r\n--{boundary}\r\nContent-Type: {content_type}\r\n\r\n".encode(),
            data, f"\r\n--{boundary}--\r\n".encode(),
        ])  # fmt: skip
        params = {"uploadType": "multipart", "name": name, **conditions.query()}
        async with session.post(
            f"{self._upstream}/upload/storage/v1/b/{quote(bucket, safe='')}/o", params=params,
            data=payload, headers={"Content-Type": f"multipart/related; boundary={boundary}"},
        ) as answer:  # fmt: skip
            text = await answer.read()
            if answer.status == 412:
                raise XmlError(412, "PreconditionFailed", _PRECONDITION_FAILED)
            if answer.status == 404:
                raise XmlError(404, "NoSuchBucket", "The specified bucket does not exist.")
            if answer.status >= 300:
                raise XmlError(answer.status, _ERROR_CODES.get(answer.status, "InternalError"),
                               text.decode(errors="replace")[:200])  # fmt: skip
            result: dict[str, object] = json.loads(text)
            return result

    async def _read(self, session: aiohttp.ClientSession, bucket: str, name: str
                    ) -> tuple[bytes, str | None]:  # fmt: skip
        async with session.get(self._download_url(bucket, name)) as answer:
            data = await answer.read()
            if answer.status == 404:
                raise XmlError(404, "NoSuchKey", "The specified key does not exist.")
            if answer.status >= 300:
                raise XmlError(answer.status, "InternalError", "reading the copy source failed")
            return data, answer.headers.get("Content-Type")

    def _download_url(self, bucket: str, name: str) -> str:
        return (f"{self._upstream}/download/storage/v1/b/{quote(bucket, safe='')}/o/"
                f"{quote(name, safe='')}")  # fmt: skip

    async def _download(self, session: aiohttp.ClientSession, request: web.Request, bucket: str,
                        name: str, headers: Mapping[str, str]) -> web.Response:  # fmt: skip
        forward = {k: v for k, v in request.headers.items()
                   if k.lower() in ("range", "accept-encoding")}  # fmt: skip
        generation = request.query.get("generation")
        params = {"generation": generation} if generation else {}
        head = request.method == "HEAD"
        async with session.request(request.method, self._download_url(bucket, name),
                                   params=params, headers=forward) as answer:  # fmt: skip
            data = await answer.read()
            if answer.status == 404:
                raise XmlError(404, "NoSuchKey", "The specified key does not exist.")
            out = {k: v for k, v in answer.headers.items()
                   if k.lower() not in ("content-length", "transfer-encoding", "connection",
                                        "date", "content-encoding")}  # fmt: skip
            if answer.status < 300:
                _check_read_conditions(headers, answer.headers)
            if head:
                out["Content-Length"] = answer.headers.get("Content-Length", "0")
                return web.Response(status=answer.status, headers=out)
            return web.Response(status=answer.status, body=data, headers=out)

    async def _delete(self, session: aiohttp.ClientSession, bucket: str, name: str,
                      headers: Mapping[str, str]) -> web.Response:  # fmt: skip
        for condition in (_GENERATION_MATCH, _GENERATION_NOT_MATCH):
            if condition in headers:  # fake-gcs-server deletes unconditionally
                raise XmlError(501, "NotImplemented",
                               f"{condition} on a delete is not supported by the local GCS "
                               "stand-in")  # fmt: skip
        url = f"{self._upstream}/storage/v1/b/{quote(bucket, safe='')}/o/{quote(name, safe='')}"
        async with session.delete(url) as answer:
            await answer.read()
            if answer.status == 404:
                raise XmlError(404, "NoSuchKey", "The specified key does not exist.")
            if answer.status >= 300:
                raise XmlError(answer.status, "InternalError", "the delete failed")
        return web.Response(status=204)

    async def _copy(self, session: aiohttp.ClientSession, bucket: str, name: str,
                    headers: Mapping[str, str]) -> web.Response:  # fmt: skip
        """Read the source, then write it with the destination's preconditions (atomic on the
        destination, as GCS's copy is)."""
        conditions = Conditions.from_headers(headers)
        src_bucket, src_name = copy_source(headers["x-goog-copy-source"])
        data, content_type = await self._read(session, src_bucket, src_name)
        resource: dict[str, object] = {"contentType": content_type} if content_type else {}
        written = await self._write(session, bucket, name, data, resource, conditions)
        body = (f"<CopyObjectResult><LastModified>{escape(str(written.get('updated', '')))}"
                f"</LastModified><ETag>\"{escape(str(written.get('etag', '')))}\"</ETag>"
                "</CopyObjectResult>")  # fmt: skip
        return _xml(body, {"x-goog-generation": str(written.get("generation", ""))})

    def _initiate(self, bucket: str, name: str, headers: Mapping[str, str]) -> web.Response:
        upload = MultipartUpload(bucket, name, _attributes(headers),
                                 Conditions.from_headers(headers))  # fmt: skip
        upload_id = self._uploads.start(upload)
        body = (f"<InitiateMultipartUploadResult><Bucket>{escape(bucket)}</Bucket>"
                f"<Key>{escape(name)}</Key><UploadId>{escape(upload_id)}</UploadId>"
                "</InitiateMultipartUploadResult>")  # fmt: skip
        return _xml(body)

    def _put_part(self, bucket: str, name: str, query: Mapping[str, str], body: bytes
                  ) -> web.Response:  # fmt: skip
        try:
            number = int(query.get("partNumber", ""))
        except ValueError as exc:
            raise XmlError(400, "InvalidArgument", "partNumber is not a number") from exc
        if not 1 <= number <= MAX_PART_NUMBER:
            raise XmlError(400, "InvalidArgument", "partNumber must be within 1..10000")
        upload = self._uploads.get(query["uploadId"], bucket, name)
        etag = self._uploads.put_part(upload, number, body)
        return web.Response(headers={"ETag": etag})

    async def _complete(self, session: aiohttp.ClientSession, bucket: str, name: str,
                        upload_id: str, headers: Mapping[str, str], body: bytes
                        ) -> web.Response:  # fmt: skip
        upload = self._uploads.get(upload_id, bucket, name)
        conditions = Conditions.from_headers(headers).or_else(upload.conditions)
        data = assemble(upload, parse_complete(body))
        self._uploads.pop(upload_id)  # a concurrent completion finds no upload
        try:
            written = await self._write(session, bucket, name, data, upload.attributes,
                                        conditions)  # fmt: skip
        except BaseException:
            self._uploads.restore(upload_id, upload)  # still abortable or completable
            raise
        body_xml = (f"<CompleteMultipartUploadResult><Location>/{escape(bucket)}/"
                    f"{escape(name)}</Location><Bucket>{escape(bucket)}</Bucket>"
                    f"<Key>{escape(name)}</Key><ETag>\"{escape(str(written.get('etag', '')))}\""
                    "</ETag></CompleteMultipartUploadResult>")  # fmt: skip
        return _xml(body_xml, {"x-goog-generation": str(written.get("generation", ""))})

    async def _list(self, session: aiohttp.ClientSession, bucket: str,
                    query: Mapping[str, str]) -> web.Response:  # fmt: skip
        """ListObjectsV2 (and V1's `marker`) on the JSON list, one page per call."""
        v2 = query.get("list-type") == "2"
        try:
            max_keys = min(int(query.get("max-keys", MAX_LIST_KEYS)), MAX_LIST_KEYS)
        except ValueError as exc:
            raise XmlError(400, "InvalidArgument", "max-keys is not a number") from exc
        prefix = query.get("prefix", "")
        delimiter = query.get("delimiter", "")
        after = query.get("start-after" if v2 else "marker", "")
        token = query.get("continuation-token") if v2 else None
        if token:
            after = _untoken(token)
        # One more than a page tells truncation; one more again: `after` itself may come back.
        params: dict[str, str] = {"prefix": prefix, "maxResults": str(max_keys + 2)}
        if delimiter:
            params["delimiter"] = delimiter
        if after:
            params["startOffset"] = after  # inclusive: `after` itself is dropped below
        url = f"{self._upstream}/storage/v1/b/{quote(bucket, safe='')}/o"
        async with session.get(url, params=params) as answer:
            text = await answer.read()
            if answer.status == 404:
                raise XmlError(404, "NoSuchBucket", "The specified bucket does not exist.")
            if answer.status >= 300:
                raise XmlError(answer.status, "InternalError", "the list failed")
        listing = json.loads(text)
        items = [i for i in listing.get("items", []) if not after or i["name"] > after]
        prefixes = [p for p in listing.get("prefixes", []) if not after or p > after]
        truncated = len(items) > max_keys
        items = items[:max_keys]
        next_key = items[-1]["name"] if truncated else ""
        if truncated:
            # fake-gcs-server pages objects only; a prefix past this page's last key comes next.
            prefixes = [p for p in prefixes if p <= next_key]
        out = [f"<ListBucketResult xmlns=\"http://doc.s3.amazonaws.com/2006-03-01\">"
               f"<Name>{escape(bucket)}</Name><Prefix>{escape(prefix)}</Prefix>"
               f"<MaxKeys>{max_keys}</MaxKeys><IsTruncated>{str(truncated).lower()}"
               "</IsTruncated>"]  # fmt: skip
        if delimiter:
            out.append(f"<Delimiter>{escape(delimiter)}</Delimiter>")
        if v2:
            out.append(f"<KeyCount>{len(items) + len(prefixes)}</KeyCount>")
            if truncated:
                out.append(f"<NextContinuationToken>{_token(next_key)}</NextContinuationToken>")
        elif truncated:
            out.append(f"<NextMarker>{escape(next_key)}</NextMarker>")
        for item in items:
            out.append(f"<Contents><Key>{escape(item['name'])}</Key>"
                       f"<Generation>{escape(str(item.get('generation', '')))}</Generation>"
                       f"<MetaGeneration>{escape(str(item.get('metageneration', '1')))}"
                       f"</MetaGeneration><LastModified>{escape(str(item.get('updated', '')))}"
                       f"</LastModified><ETag>\"{escape(str(item.get('etag', '')))}\"</ETag>"
                       f"<Size>{escape(str(item.get('size', '0')))}</Size></Contents>")  # fmt: skip
        for common in prefixes:
            out.append(f"<CommonPrefixes><Prefix>{escape(common)}</Prefix></CommonPrefixes>")
        out.append("</ListBucketResult>")
        return _xml("".join(out))


def copy_source(header: str) -> tuple[str, str]:
    """(bucket, object) of an `x-goog-copy-source: [/]<bucket>/<percent-encoded object>`.

    Raises:
        XmlError: 400 when it names no object.
    """
    bucket, _, name = header.lstrip("/").partition("/")
    if not bucket or not name:
        raise XmlError(400, "InvalidArgument", "x-goog-copy-source names no object")
    return unquote(bucket), unquote(name)


def _check_read_conditions(request: Mapping[str, str], response: Mapping[str, str]) -> None:
    """`If-Match`, `If-None-Match` and generation conditions, on the object actually returned.

    Raises:
        XmlError: 412 (If-Match / generation-match failed) or 304 (If-None-Match matched).
    """
    etag = (response.get("ETag") or "").strip('"')
    generation = response.get("X-Goog-Generation") or response.get("x-goog-generation") or ""
    if_match = request.get("if-match")
    if if_match is not None and if_match.strip() != "*" and if_match.strip('"') != etag:
        raise XmlError(412, "PreconditionFailed", "If-Match did not hold.")
    match = request.get(_GENERATION_MATCH)
    if match is not None and match != generation:
        raise XmlError(412, "PreconditionFailed", "x-goog-if-generation-match did not hold.")
    not_match = request.get(_GENERATION_NOT_MATCH)
    if not_match is not None and not_match == generation:
        raise XmlError(304, "NotModified", "x-goog-if-generation-not-match matched.")
    if_none = request.get("if-none-match")
    if if_none is not None and (if_none.strip() == "*" or if_none.strip('"') == etag):
        raise XmlError(304, "NotModified", "If-None-Match matched.")
    for name in ("if-modified-since", "if-unmodified-since"):
        if name in request:
            raise XmlError(501, "NotImplemented",
                           f"{name} is not supported by the local GCS stand-in")  # fmt: skip


def _token(last_key: str) -> str:
    """A continuation token: the last key of the page (the next page starts after it)."""
    return base64.urlsafe_b64encode(last_key.encode()).decode()


def _untoken(token: str) -> str:
    """Raises: XmlError 400 for a token this layer did not issue."""
    try:
        return base64.b64decode(token.encode(), altchars=b"-_", validate=True).decode()
    except (ValueError, UnicodeDecodeError) as exc:
        raise XmlError(400, "InvalidArgument", "the continuation token is not valid") from exc
