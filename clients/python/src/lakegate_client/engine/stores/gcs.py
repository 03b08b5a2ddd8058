"""Google Cloud Storage as an :class:`~lakegate_client.engine.stores.base.ObjectStore`: the JSON
API over httpx, authorised by the vended OAuth token.

Markers, intents and claims are JSON multipart uploads with ``ifGenerationMatch=0`` (only if
absent) or ``ifGenerationMatch=<generation>`` (only if unchanged); a refused one is 412. An
object's "ETag" here is its generation, the number GCS's preconditions compare.

Staging: a task writes each part of a file as its own object under
``<dir>/_lakegate_staging/<upload id>/<name>/<part>``, hidden from every reader by the Hive
convention (a path component starting with ``_`` is not data); the driver's completion composes
the parts into the file with ``ifGenerationMatch=0`` (a tree of composes for more than 32 parts),
which is when the file appears, then deletes the parts. Why not a resumable upload session,
which is invisible until finalized too: a session URI is a bearer capability (anyone holding it
may upload, no token needed), and the upload id travels in Spark's commit messages and in the
commit intent every reader of the table can read; a random id naming staging objects is not a
secret. Abandoning deletes the parts; nothing touches a completed file.

No URL here holds a secret (the token goes in a header), and no error message holds the token.
"""

from __future__ import annotations

import json
import os
import secrets
import uuid
from collections.abc import Iterator, Sequence
from functools import lru_cache
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

import httpx

from lakegate_client.engine.stores.base import S3Location

if TYPE_CHECKING:
    from lakegate_client import TableCredentials
    from lakegate_client.engine.stores.base import PendingUpload

__all__ = ["GOOGLE_STORAGE", "STAGING_DIR", "GcsStore", "GcsStoreError"]

GOOGLE_STORAGE = "https://storage.googleapis.com"
STAGING_DIR = "_lakegate_staging"
MAX_COMPOSE_SOURCES = 32  # GCS's limit per compose
TIMEOUT_S = 60.0


class GcsStoreError(OSError):
    """A GCS JSON-API call failed (status and Google's reason; never the token)."""

    def __init__(self, what: str, status: int, reason: str = "") -> None:
        super().__init__(f"{what}: HTTP {status} {reason}".rstrip())
        self.status, self.reason = status, reason


@lru_cache(maxsize=4)
def _http(pid: int) -> httpx.Client:
    """One connection pool per process (``pid``: a forked child builds its own)."""
    return httpx.Client(timeout=TIMEOUT_S, trust_env=False,
                        limits=httpx.Limits(max_connections=32, max_keepalive_connections=16))


def _generation(etag: str) -> int:
    """The generation an ETag names. One this store never spelled (not a generation number)
    cannot be current: it is sent as generation 1, which no live object has, so the store
    itself refuses the write (the conditional-writes probe relies on asking the store)."""
    text = etag.strip('"')
    return int(text) if text.isdigit() else 1


def staging_prefix(key: str, upload_id: str) -> str:
    """Where the parts of the upload of ``key`` live: beside it, under the hidden staging dir."""
    directory, _, name = key.rpartition("/")
    base = f"{directory}/{STAGING_DIR}" if directory else STAGING_DIR
    return f"{base}/{upload_id}/{name}/"


def staged_key(staging_object: str) -> tuple[str, str] | None:
    """``(key, upload id)`` of a staging object's upload, or None for any other object."""
    marker = f"{STAGING_DIR}/"
    head, sep, rest = staging_object.rpartition(f"/{marker}")
    if not sep:
        if not staging_object.startswith(marker):
            return None
        head, rest = "", staging_object[len(marker) :]
    upload_id, _, remainder = rest.partition("/")
    name, _, _part = remainder.rpartition("/")
    if not upload_id or not name:
        return None
    return (f"{head}/{name}" if head else name), upload_id


class GcsStore:
    """One bucket of GCS (or a local stand-in), through a vended OAuth token (thread-safe)."""

    abandon_removes = True

    def __init__(self, endpoint: str | None, bucket: str, token: str,
                 http: httpx.Client | None = None) -> None:
        self._endpoint = (endpoint or GOOGLE_STORAGE).rstrip("/")
        self._bucket = bucket
        self._auth = {"Authorization": f"Bearer {token}"}
        self._http_client = http

    @classmethod
    def for_credentials(cls, creds: TableCredentials) -> GcsStore:
        """The bucket of a GCS credential's table (the endpoint override included)."""
        gcs = creds.gcs()
        return cls(gcs.endpoint, S3Location.parse(creds.location).bucket, gcs.token)

    @property
    def endpoint(self) -> str:
        return self._endpoint

    @property
    def bucket(self) -> str:
        return self._bucket

    @property
    def _client(self) -> httpx.Client:
        return self._http_client or _http(os.getpid())

    def _object_url(self, key: str) -> str:
        bucket = quote(self._bucket, safe="")
        return f"{self._endpoint}/storage/v1/b/{bucket}/o/{quote(key, safe='')}"

    def _send(self, method: str, what: str, url: str, *, body: bytes | None = None,
              params: dict[str, str] | None = None, headers: dict[str, str] | None = None
              ) -> httpx.Response:  # fmt: skip
        try:
            return self._client.request(method, url, content=body, params=params,
                                        headers={**self._auth, **(headers or {})})  # fmt: skip
        except httpx.HTTPError as exc:  # its message may hold the URL, never the token; drop it
            raise GcsStoreError(what, 0, type(exc).__name__) from None

    @staticmethod
    def _fail(what: str, answer: httpx.Response) -> GcsStoreError:
        reason = ""
        try:
            reason = str(answer.json()["error"]["message"])[:200]
        except (ValueError, KeyError, TypeError):
            pass
        return GcsStoreError(what, answer.status_code, reason)

    def _upload(self, key: str, body: bytes, condition: dict[str, str]) -> httpx.Response:
        boundary = secrets.token_hex(16)
        payload = b"".join([
            f"--{boundary}\r\nContent-Type: application/json; charset=UTF-8\r\n\r\n".encode(),
            json.dumps({"name": key}).encode(),
            f"\r\n--{boundary}\r\nContent-Type: application/octet-stream\r\n\r\n".encode(),
            body, f"\r\n--{boundary}--\r\n".encode(),
        ])  # fmt: skip
        url = f"{self._endpoint}/upload/storage/v1/b/{quote(self._bucket, safe='')}/o"
        return self._send("POST", f"upload {key}", url, body=payload,
                          params={"uploadType": "multipart", **condition},
                          headers={"Content-Type": f"multipart/related; boundary={boundary}"},
                          )  # fmt: skip

    def put(self, key: str, body: bytes) -> str:
        answer = self._upload(key, body, {})
        if answer.status_code != 200:
            raise self._fail(f"upload {key}", answer)
        return str(answer.json()["generation"])

    def put_if(self, key: str, body: bytes, etag: str | None) -> str | None:
        generation = 0 if etag is None else _generation(etag)
        answer = self._upload(key, body, {"ifGenerationMatch": str(generation)})
        if answer.status_code == 200:
            return str(answer.json()["generation"])
        if answer.status_code == 412:
            return None  # someone else wrote first (or the object we expected is gone)
        raise self._fail(f"upload {key}", answer)

    def get(self, key: str) -> tuple[bytes, str] | None:
        answer = self._send("GET", f"get {key}", self._object_url(key), params={"alt": "media"})
        if answer.status_code == 404:
            return None
        if answer.status_code != 200:
            raise self._fail(f"get {key}", answer)
        return answer.content, answer.headers["x-goog-generation"]

    def head(self, key: str) -> str | None:
        answer = self._send("GET", f"get metadata {key}", self._object_url(key))
        if answer.status_code == 404:
            return None
        if answer.status_code != 200:
            raise self._fail(f"get metadata {key}", answer)
        return str(answer.json()["generation"])

    def delete(self, key: str) -> None:
        answer = self._send("DELETE", f"delete {key}", self._object_url(key))
        if answer.status_code not in (200, 204, 404):
            raise self._fail(f"delete {key}", answer)

    def _listing(self, prefix: str, limit: int | None = None) -> Iterator[dict[str, Any]]:
        """Every item of a listing under ``prefix`` (all pages; with ``limit``, the first page
        of at most that many)."""
        params = {"prefix": prefix, "fields": "items(name,generation),nextPageToken"}
        if limit is not None:
            params["maxResults"] = str(limit)
        url = f"{self._endpoint}/storage/v1/b/{quote(self._bucket, safe='')}/o"
        for _ in range(1_000_000):  # bounded: one page per call
            answer = self._send("GET", f"list {prefix}", url, params=params)
            if answer.status_code != 200:
                raise self._fail(f"list {prefix}", answer)
            page = answer.json()
            yield from page.get("items", ())
            token = page.get("nextPageToken")
            if not token or limit is not None:
                return
            params = {**params, "pageToken": str(token)}
        raise GcsStoreError(f"list {prefix}", 0, "too many pages")

    def list(self, prefix: str) -> dict[str, str]:
        """Every object under ``prefix`` (all pages), staging objects included: the protocols
        look only at the names they know, and readers skip ``_`` components."""
        return {str(item["name"]): str(item["generation"]) for item in self._listing(prefix)}

    def first_keys(self, prefix: str, limit: int) -> tuple[str, ...]:
        names = (str(item["name"]) for item in self._listing(prefix, limit))
        return tuple(names)[:limit]

    def start_staged(self, key: str) -> str:
        return uuid.uuid4().hex  # no call: the parts are objects named after it

    def stage_part(self, key: str, upload_id: str, number: int, body: bytes) -> str:
        part = f"{staging_prefix(key, upload_id)}{number:06d}"
        generation = self.put_if(part, body, None)
        if generation is None:  # a part name is unique per upload: only a retry meets it
            generation = self.head(part)
            if generation is None:
                raise GcsStoreError(f"stage {key}", 412, "the part vanished")
        return generation

    def complete_staged(self, upload: PendingUpload) -> None:
        """Compose the parts into ``upload.key`` only if it does not exist yet; a completion
        that fails finds the file already there when it was completed before (a lost answer,
        a recoverer), else raises. Then the parts are deleted."""
        prefix = staging_prefix(upload.key, upload.upload_id)
        sources = [(f"{prefix}{number:06d}", tag) for number, tag in upload.parts]
        try:
            level = 0
            while len(sources) > MAX_COMPOSE_SOURCES:
                grouped = [sources[i : i + MAX_COMPOSE_SOURCES]
                           for i in range(0, len(sources), MAX_COMPOSE_SOURCES)]  # fmt: skip
                sources = [(f"{prefix}c{level}-{i:06d}",
                            self._compose(f"{prefix}c{level}-{i:06d}", group, None))
                           for i, group in enumerate(grouped)]  # fmt: skip
                level += 1
            self._compose(upload.key, sources, 0)
        except GcsStoreError:
            if self.head(upload.key) is None:
                raise
        for name in self.list(prefix):
            self.delete(name)

    def _compose(self, key: str, sources: Sequence[tuple[str, str]], if_generation: int | None
                 ) -> str:  # fmt: skip
        body = {"sourceObjects": [{"name": name, "generation": tag} for name, tag in sources],
                "destination": {"contentType": "application/octet-stream"}}  # fmt: skip
        params = {} if if_generation is None else {"ifGenerationMatch": str(if_generation)}
        answer = self._send("POST", f"compose {key}", f"{self._object_url(key)}/compose",
                            body=json.dumps(body).encode(), params=params,
                            headers={"Content-Type": "application/json"})  # fmt: skip
        if answer.status_code != 200:
            raise self._fail(f"compose {key}", answer)
        return str(answer.json()["generation"])

    def abandon_staged(self, key: str, upload_id: str) -> bool:
        parts = self.list(staging_prefix(key, upload_id))
        for name in parts:
            self.delete(name)
        return bool(parts)

    def pending_staged(self, prefix: str) -> Iterator[tuple[str, str]]:
        """Uploads with staged parts under ``prefix`` (also a completed one whose parts were not
        deleted yet: abandoning it deletes only those parts)."""
        seen: set[tuple[str, str]] = set()
        for name in sorted(self.list(prefix)):
            upload = staged_key(name)
            if upload is not None and upload not in seen:
                seen.add(upload)
                yield upload
