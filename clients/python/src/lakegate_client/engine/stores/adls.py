"""ADLS Gen2 / Azure Blob Storage as an :class:`~lakegate_client.engine.stores.base.ObjectStore`:
the Blob REST API over httpx, authorised by the vended SAS token.

Why the Blob API (not the DFS one): every ADLS Gen2 account serves it, and it has what the write
protocols need. A task stages a file as uncommitted blocks (Put Block), invisible to every reader
and listing; the driver's Put Block List publishes it (with ``If-None-Match: *``, so a second
completion is recognised, never a rewrite). Markers, intents and claims are Put Blob with
``If-None-Match: *`` (refused: 409 ``BlobAlreadyExists``) or ``If-Match: <etag>`` (refused: 412
``ConditionNotMet``; 404 when the blob is gone).

Giving a staged file up (``abandon_staged``) is a Delete Blob, only of a blob with no committed
version (a HEAD first, and ``If-None-Match: *``), so it never removes a published file. What it
frees differs: Azurite answers 202 and drops the blob from listings, though its blocks can still
be committed by id; Azure documents no call that discards uncommitted blocks other than a Put
Block List or Put Blob of the name (either would publish a file readers can see), and garbage
collects them after 7 days. Either way the blocks stay invisible to every reader, and their ids
carry the upload id, so nothing commits them by mistake. Staged files are listed with List Blobs
``include=uncommittedblobs``, which a SAS with ``l`` may do, so the job's sweep runs on ADLS.

Every URL carries the SAS, so no URL goes into an error message or a log.
"""

from __future__ import annotations

import base64
import os
import uuid
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from functools import lru_cache
from typing import TYPE_CHECKING
from urllib.parse import quote

import httpx

from lakegate_client.engine.stores.base import S3Location

if TYPE_CHECKING:
    from lakegate_client import TableCredentials
    from lakegate_client.engine.stores.base import PendingUpload

__all__ = ["API_VERSION", "AzureBlobStore", "AzureStoreError"]

API_VERSION = "2021-08-06"  # Blob REST version sent; its semantics are all this module uses
TIMEOUT_S = 60.0


class AzureStoreError(OSError):
    """A Blob REST call failed (status and Azure's error code; never the URL: it holds the SAS)."""

    def __init__(self, what: str, status: int, code: str) -> None:
        super().__init__(f"{what}: HTTP {status} {code}".rstrip())
        self.status, self.code = status, code


@lru_cache(maxsize=4)
def _http(pid: int) -> httpx.Client:
    """One connection pool per process (``pid``: a forked child builds its own)."""
    return httpx.Client(timeout=TIMEOUT_S, trust_env=False,
                        limits=httpx.Limits(max_connections=32, max_keepalive_connections=16))


def _xml(content: bytes) -> ET.Element:
    """Parse a listing the storage account answered (expat resolves no external entities and,
    since 2.4.1, bounds entity expansion)."""
    return ET.fromstring(content)  # noqa: S314 - the table's own store, over its SAS


def _quoted(etag: str) -> str:
    """Listings spell an ETag bare (``0x8D...``), headers quoted: one spelling everywhere."""
    return etag if etag.startswith('"') else f'"{etag}"'


class AzureBlobStore:
    """One container of one storage account, through a SAS token (thread-safe)."""

    abandon_removes = True  # drops the staged blob from listings (module docstring)

    def __init__(self, blob_endpoint: str, container: str, sas_token: str,
                 http: httpx.Client | None = None) -> None:
        self._base = f"{blob_endpoint.rstrip('/')}/{container}"
        self._endpoint, self._container = blob_endpoint.rstrip("/"), container
        self._sas = sas_token.lstrip("?")
        self._http_client = http

    @classmethod
    def for_credentials(cls, creds: TableCredentials) -> AzureBlobStore:
        """The container of an ADLS credential's table (the endpoint override included)."""
        adls = creds.adls()
        return cls(adls.blob_endpoint, S3Location.parse(creds.location).bucket, adls.sas_token)

    @property
    def endpoint(self) -> str:
        return self._endpoint

    @property
    def bucket(self) -> str:
        return self._container

    @property
    def _client(self) -> httpx.Client:
        return self._http_client or _http(os.getpid())

    def _url(self, key: str, query: str = "") -> str:
        path = f"{self._base}/{quote(key, safe='/')}" if key else self._base
        return f"{path}?{query}&{self._sas}" if query else f"{path}?{self._sas}"

    def _send(self, method: str, what: str, url: str, *, body: bytes | None = None,
              headers: dict[str, str] | None = None) -> httpx.Response:
        try:
            return self._client.request(
                method, url, content=body,
                headers={"x-ms-version": API_VERSION, **(headers or {})})
        except httpx.HTTPError as exc:  # its message never holds the URL; drop the chain's
            raise AzureStoreError(what, 0, type(exc).__name__) from None

    @staticmethod
    def _fail(what: str, answer: httpx.Response) -> AzureStoreError:
        return AzureStoreError(what, answer.status_code,
                               answer.headers.get("x-ms-error-code", ""))

    def put(self, key: str, body: bytes) -> str:
        answer = self._send("PUT", f"Put Blob {key}", self._url(key), body=body,
                            headers={"x-ms-blob-type": "BlockBlob"})
        if answer.status_code != 201:
            raise self._fail(f"Put Blob {key}", answer)
        return _quoted(answer.headers["ETag"])

    def put_if(self, key: str, body: bytes, etag: str | None) -> str | None:
        condition = {"If-Match": etag} if etag else {"If-None-Match": "*"}
        answer = self._send("PUT", f"Put Blob {key}", self._url(key), body=body,
                            headers={"x-ms-blob-type": "BlockBlob", **condition})
        if answer.status_code == 201:
            return _quoted(answer.headers["ETag"])
        code = answer.headers.get("x-ms-error-code", "")
        if answer.status_code == 412 or (answer.status_code == 409 and code == "BlobAlreadyExists"):
            return None  # someone else wrote first
        if etag and answer.status_code == 404:
            return None  # the blob we expected is gone: someone else moved it
        raise self._fail(f"Put Blob {key}", answer)

    def get(self, key: str) -> tuple[bytes, str] | None:
        answer = self._send("GET", f"Get Blob {key}", self._url(key))
        if answer.status_code == 404:
            return None
        if answer.status_code != 200:
            raise self._fail(f"Get Blob {key}", answer)
        return answer.content, _quoted(answer.headers["ETag"])

    def head(self, key: str) -> str | None:
        answer = self._send("HEAD", f"Get Blob Properties {key}", self._url(key))
        if answer.status_code == 404:
            return None
        if answer.status_code != 200:
            raise self._fail(f"Get Blob Properties {key}", answer)
        return _quoted(answer.headers["ETag"])

    def delete(self, key: str) -> None:
        answer = self._send("DELETE", f"Delete Blob {key}", self._url(key))
        if answer.status_code not in (202, 404):
            raise self._fail(f"Delete Blob {key}", answer)

    def _listing(self, prefix: str, include: str = "",
                 limit: int | None = None) -> Iterator[ET.Element]:
        """Every ``<Blob>`` of a List Blobs under ``prefix`` (all pages; with ``limit``, the
        first page of at most that many)."""
        marker = ""
        while True:
            query = f"restype=container&comp=list&prefix={quote(prefix, safe='')}"
            if include:
                query += f"&include={include}"
            if limit is not None:
                query += f"&maxresults={limit}"
            if marker:
                query += f"&marker={quote(marker, safe='')}"
            answer = self._send("GET", f"List Blobs {prefix}", self._url("", query))
            if answer.status_code != 200:
                raise self._fail(f"List Blobs {prefix}", answer)
            root = _xml(answer.content)
            yield from root.iter("Blob")
            marker = root.findtext("NextMarker") or ""
            if not marker or limit is not None:
                return

    def list(self, prefix: str) -> dict[str, str]:
        return {str(blob.findtext("Name")): _quoted(blob.findtext("Properties/Etag") or "")
                for blob in self._listing(prefix)}

    def first_keys(self, prefix: str, limit: int) -> tuple[str, ...]:
        names = (str(blob.findtext("Name")) for blob in self._listing(prefix, limit=limit))
        return tuple(names)[:limit]

    def start_staged(self, key: str) -> str:
        return uuid.uuid4().hex  # no call: blocks are staged under the blob's name

    @staticmethod
    def block_id(upload_id: str, number: int) -> str:
        """A blob's block ids must all have one length: the upload id and a fixed-width part."""
        return base64.b64encode(f"{upload_id}-{number:06d}".encode()).decode()

    def stage_part(self, key: str, upload_id: str, number: int, body: bytes) -> str:
        block = self.block_id(upload_id, number)
        query = f"comp=block&blockid={quote(block, safe='')}"
        answer = self._send("PUT", f"Put Block {key}", self._url(key, query), body=body)
        if answer.status_code != 201:
            raise self._fail(f"Put Block {key}", answer)
        return block

    def complete_staged(self, upload: PendingUpload) -> None:
        """Put Block List of the upload's blocks, only if the blob does not exist yet: 409 means
        it was completed before (names are unique per attempt), never a second write."""
        blocks = "".join(f"<Latest>{block}</Latest>" for _, block in upload.parts)
        body = f'<?xml version="1.0" encoding="utf-8"?><BlockList>{blocks}</BlockList>'.encode()
        answer = self._send("PUT", f"Put Block List {upload.key}",
                            self._url(upload.key, "comp=blocklist"), body=body,
                            headers={"If-None-Match": "*"})
        if answer.status_code == 201:
            return
        if answer.status_code == 409 and answer.headers.get("x-ms-error-code") == (
                "BlobAlreadyExists"):
            return
        raise self._fail(f"Put Block List {upload.key}", answer)

    def abandon_staged(self, key: str, upload_id: str) -> bool:
        """Delete the staged blob unless it has a committed version (then it is published:
        never touched). Azurite ignores ``If-None-Match: *`` on a delete, hence the HEAD."""
        if self.head(key) is not None:
            return False
        answer = self._send("DELETE", f"Delete Blob {key}", self._url(key),
                            headers={"If-None-Match": "*"})
        if answer.status_code == 202:
            return True
        if answer.status_code in (404, 412):
            return False  # nothing staged there (any more), or published meanwhile
        raise self._fail(f"Delete Blob {key}", answer)

    def pending_staged(self, prefix: str) -> Iterator[tuple[str, str]]:
        """Blobs with uncommitted blocks and no committed version, with the upload id their
        blocks carry (Get Block List of each)."""
        committed = set(self.list(prefix))
        for blob in self._listing(prefix, "uncommittedblobs"):
            key = str(blob.findtext("Name"))
            if key in committed:
                continue
            answer = self._send("GET", f"Get Block List {key}",
                                self._url(key, "comp=blocklist&blocklisttype=uncommitted"))
            if answer.status_code == 404:
                continue  # committed or gone meanwhile
            if answer.status_code != 200:
                raise self._fail(f"Get Block List {key}", answer)
            names = _xml(answer.content).iter("Name")
            first = next((n.text for n in names if n.text), None)
            if first is not None:
                yield key, base64.b64decode(first).decode(errors="replace").rsplit("-", 1)[0]
