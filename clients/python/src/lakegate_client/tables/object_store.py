"""The object-store calls the write protocols make, as one small interface per store family.

Why: the plain-table commit (``plain_commit.py``), staged data files (``staged.py``), the
conditional-writes probe and the Lance attempt ledger need the same few things from every store:
a PUT that only lands if the object is absent or still at an ETag, reads and listings that give
ETags, deletes, and a way to write a file's bytes *invisibly* so that only the driver's commit
publishes it. S3 does the staging with multipart uploads, ADLS with uncommitted blocks, GCS with
upload sessions; the protocols above do not care which.

A store is bound to one bucket (S3, GCS) or container (ADLS) and takes full object keys. Every
ETag is an opaque string, spelled the same way by ``get``, ``head``, ``list`` and the ``put``
answers, so a listing's ETag can be compared with a ``get``'s and passed to ``put_if``.

Staging: ``start_staged(key)`` gives an upload id, ``stage_part`` sends one part (numbered from
1) and returns its tag; the task reports a :class:`PendingUpload`
(key, upload id, parts, size: never a secret); ``complete_staged`` publishes it; ``abandon_staged``
gives it up. A store whose abandoned parts cannot be removed (ADLS) says so with
``abandon_removes = False``: they stay invisible until the store's own garbage collection.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Protocol, TypeVar, runtime_checkable

__all__ = ["BatchDeletes", "ObjectStore", "PendingUpload", "S3Store", "StagingListDenied",
           "as_store", "delete_all", "each", "is_conflict", "process_batch_deletes"]

_CONFLICT_CODES = frozenset({"PreconditionFailed", "412", "ConditionalRequestConflict", "409"})
WORKERS = 8  # calls in flight at once for one batch of single calls (below botocore's pool of 10)
BATCH_DELETE_MAX = 1_000  # S3's limit of keys per DeleteObjects
T = TypeVar("T")
log = logging.getLogger(__name__)


@dataclass(frozen=True)
class PendingUpload:
    """One uncompleted upload: enough for the driver to complete or abort it (``staged.py``
    re-exports it, where tasks make them)."""

    key: str
    upload_id: str
    parts: tuple[tuple[int, str], ...]
    size: int


class StagingListDenied(Exception):
    """The credential may not list pending staged files (S3: Lakekeeper's session policy grants
    no ``s3:ListBucketMultipartUploads``)."""


@runtime_checkable
class ObjectStore(Protocol):
    """One bucket or container of one store, as the write protocols use it (thread-safe)."""

    @property
    def endpoint(self) -> str:
        """Where the store is (no secret): with :attr:`bucket`, the probe's memory key."""
        ...

    @property
    def bucket(self) -> str:
        """The bucket (S3, GCS) or container (ADLS) every key is in."""
        ...

    @property
    def abandon_removes(self) -> bool:
        """Whether :meth:`abandon_staged` frees the staged bytes (ADLS: no)."""
        ...

    def put(self, key: str, body: bytes) -> str:
        """Write ``key`` unconditionally; returns its new ETag."""
        ...

    def put_if(self, key: str, body: bytes, etag: str | None) -> str | None:
        """Write ``key`` only if it is still at ``etag`` (``None``: only if it is absent).
        Returns the new ETag, or None when the store refused because the condition failed
        (someone else wrote first); any other failure raises."""
        ...

    def get(self, key: str) -> tuple[bytes, str] | None:
        """``(body, etag)``, or None when there is no such object."""
        ...

    def head(self, key: str) -> str | None:
        """The object's ETag, or None when there is no such object."""
        ...

    def delete(self, key: str) -> None:
        """Delete ``key``; already gone is fine."""
        ...

    def list(self, prefix: str) -> dict[str, str]:
        """Every visible object whose key starts with ``prefix`` (all pages): key → ETag.
        Staged, uncompleted files are not listed."""
        ...

    def first_keys(self, prefix: str, limit: int) -> tuple[str, ...]:
        """Up to ``limit`` keys under ``prefix``, the first in name order: one listing page
        (S3, Azure Blob and GCS list in name order)."""
        ...

    def start_staged(self, key: str) -> str:
        """Begin staging a file at ``key``; returns its upload id (no secret)."""
        ...

    def stage_part(self, key: str, upload_id: str, number: int, body: bytes) -> str:
        """Stage part ``number`` (1, 2, ...) of the upload invisibly; returns the part's tag."""
        ...

    def complete_staged(self, upload: PendingUpload) -> None:
        """Publish the staged file: from now on it is a visible object at ``upload.key``.
        Idempotent: an upload already completed (by us or a recoverer) is fine; raises when it
        was neither completed nor can be."""
        ...

    def abandon_staged(self, key: str, upload_id: str) -> bool:
        """Give the upload up; True when it was there to abandon. Never touches a completed
        (visible) object."""
        ...

    def pending_staged(self, prefix: str) -> Iterator[tuple[str, str]]:
        """Every staged, uncompleted upload under ``prefix``: ``(key, upload id)``. Raises
        :class:`StagingListDenied` when the credential may not list them."""
        ...


class S3Store:
    """:class:`ObjectStore` over a boto3 S3 client (or anything answering like one).

    Each method is exactly the boto3 calls the protocols made before this interface existed, so
    the crash-point enumerations (which fail every call) count the same calls.
    """

    abandon_removes = True

    def __init__(self, client: Any, bucket: str) -> None:
        self.client, self._bucket = client, bucket

    @property
    def endpoint(self) -> str:
        return str(getattr(getattr(self.client, "meta", None), "endpoint_url", "") or "")

    @property
    def bucket(self) -> str:
        return self._bucket

    def put(self, key: str, body: bytes) -> str:
        return str(self.client.put_object(Bucket=self._bucket, Key=key, Body=body)["ETag"])

    def put_if(self, key: str, body: bytes, etag: str | None) -> str | None:
        condition = {"IfMatch": etag} if etag else {"IfNoneMatch": "*"}
        try:
            answer = self.client.put_object(Bucket=self._bucket, Key=key, Body=body,
                                            **condition)
        except self.client.exceptions.ClientError as exc:
            if is_conflict(exc, if_match=etag is not None):
                return None
            raise
        return str(answer["ETag"])

    def get(self, key: str) -> tuple[bytes, str] | None:
        try:
            answer = self.client.get_object(Bucket=self._bucket, Key=key)
        except self.client.exceptions.NoSuchKey:
            return None
        return answer["Body"].read(), str(answer["ETag"])

    def head(self, key: str) -> str | None:
        try:
            return str(self.client.head_object(Bucket=self._bucket, Key=key)["ETag"])
        except self.client.exceptions.ClientError as exc:
            if _status(exc) == 404 or _code(exc) in ("404", "NoSuchKey", "NotFound"):
                return None
            raise

    def delete(self, key: str) -> None:
        self.client.delete_object(Bucket=self._bucket, Key=key)

    def delete_many(self, keys: Sequence[str], batches: BatchDeletes | None = None) -> None:
        """Delete every key (already gone is fine): one ``DeleteObjects`` per 1,000 keys where
        the endpoint takes it, else single deletes :data:`WORKERS` at a time.

        Why a capability, not an assumption: some S3-compatible stores refuse or lack
        ``DeleteObjects`` (GCS's XML API; stores that want Content-MD5 where boto3 >= 1.36
        sends a CRC32). The first refusal is remembered per endpoint (``batches``) and that
        call's keys are deleted one by one, so a refusing store costs one request per process.
        A key the batch answers with an error is deleted singly (which raises if it fails).
        """
        unique = list(dict.fromkeys(keys))
        batches = batches or process_batch_deletes()
        if len(unique) <= 1 or not batches.allowed(self.endpoint):
            each(self.delete, unique)
            return
        for start in range(0, len(unique), BATCH_DELETE_MAX):
            chunk = unique[start:start + BATCH_DELETE_MAX]
            try:
                answer = self.client.delete_objects(
                    Bucket=self._bucket,
                    Delete={"Objects": [{"Key": key} for key in chunk], "Quiet": True})
            except self.client.exceptions.ClientError as exc:
                batches.refused(self.endpoint, exc)
                each(self.delete, unique[start:])
                return
            each(self.delete, [str(e.get("Key")) for e in answer.get("Errors", ()) or ()
                               if e.get("Key") in chunk])

    def list(self, prefix: str) -> dict[str, str]:
        out: dict[str, str] = {}
        kwargs: dict[str, str] = {"Bucket": self._bucket, "Prefix": prefix}
        while True:
            page = self.client.list_objects_v2(**kwargs)
            for obj in page.get("Contents", ()):
                out[str(obj["Key"])] = str(obj.get("ETag", ""))
            if not page.get("IsTruncated"):
                return out
            kwargs["ContinuationToken"] = str(page["NextContinuationToken"])

    def first_keys(self, prefix: str, limit: int) -> tuple[str, ...]:
        page = self.client.list_objects_v2(Bucket=self._bucket, Prefix=prefix, MaxKeys=limit)
        return tuple(str(obj["Key"]) for obj in page.get("Contents", ()))[:limit]

    def start_staged(self, key: str) -> str:
        return str(self.client.create_multipart_upload(Bucket=self._bucket, Key=key)["UploadId"])

    def stage_part(self, key: str, upload_id: str, number: int, body: bytes) -> str:
        answer = self.client.upload_part(Bucket=self._bucket, Key=key, UploadId=upload_id,
                                         PartNumber=number, Body=body)
        return str(answer["ETag"])

    def complete_staged(self, upload: PendingUpload) -> None:
        try:
            self._complete(upload)
        except self.client.exceptions.NoSuchUpload:
            # completed before (a lost answer, a recoverer): only a visible object is fine
            self.client.head_object(Bucket=self._bucket, Key=upload.key)

    def _complete(self, upload: PendingUpload) -> None:
        self.client.complete_multipart_upload(
            Bucket=self._bucket, Key=upload.key, UploadId=upload.upload_id,
            MultipartUpload={"Parts": [{"PartNumber": n, "ETag": e} for n, e in upload.parts]},
        )

    def abandon_staged(self, key: str, upload_id: str) -> bool:
        try:
            self.client.abort_multipart_upload(Bucket=self._bucket, Key=key, UploadId=upload_id)
        except self.client.exceptions.NoSuchUpload:
            return False
        return True

    def pending_staged(self, prefix: str) -> Iterator[tuple[str, str]]:
        kwargs: dict[str, str] = {"Bucket": self._bucket, "Prefix": prefix}
        while True:
            try:
                page = self.client.list_multipart_uploads(**kwargs)
            except self.client.exceptions.ClientError as exc:
                if _code(exc) == "AccessDenied":
                    raise StagingListDenied(str(exc)) from exc
                raise
            for upload in page.get("Uploads", ()):
                yield str(upload["Key"]), str(upload["UploadId"])
            if not page.get("IsTruncated"):
                return
            kwargs["KeyMarker"] = str(page.get("NextKeyMarker", ""))
            kwargs["UploadIdMarker"] = str(page.get("NextUploadIdMarker", ""))


def _code(exc: BaseException) -> str:
    response = getattr(exc, "response", None) or {}
    return str(response.get("Error", {}).get("Code", ""))


def _status(exc: BaseException) -> int:
    response = getattr(exc, "response", None) or {}
    return int(response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0) or 0)


class BatchDeletes:
    """Which endpoints refused ``DeleteObjects``, for the life of the process (thread-safe).

    A server error (5xx but 501 Not Implemented) says nothing about the capability: that call
    falls back, the next one tries the batch again.
    """

    def __init__(self) -> None:
        self._refused: set[str] = set()
        self._lock = threading.Lock()

    def allowed(self, endpoint: str) -> bool:
        with self._lock:
            return endpoint not in self._refused

    def refused(self, endpoint: str, exc: BaseException) -> None:
        status = _status(exc)
        if status >= 500 and status != 501:
            return
        with self._lock:
            known = endpoint in self._refused
            self._refused.add(endpoint)
        if not known:
            log.info("the store at %s refused DeleteObjects (%s %s): deleting one object at a "
                     "time there", endpoint or "(default endpoint)", status, _code(exc))


@lru_cache(maxsize=1)
def process_batch_deletes() -> BatchDeletes:
    """The process's memory of refusing endpoints (like the conditional-writes probe's)."""
    return BatchDeletes()


def each(call: Callable[[str], T], items: Sequence[str]) -> list[T]:
    """``call`` on every item, :data:`WORKERS` at a time (the stores' clients are thread-safe);
    the first error raises once every call was tried."""
    if len(items) <= 1:
        return [call(item) for item in items]
    with ThreadPoolExecutor(max_workers=min(WORKERS, len(items)),
                            thread_name_prefix="lakegate-store") as pool:
        futures = [pool.submit(call, item) for item in items]
    return [future.result() for future in futures]


def delete_all(store: ObjectStore, keys: Sequence[str]) -> None:
    """Delete every key (idempotent): in batches where the store has them (S3), else
    :data:`WORKERS` single deletes at a time."""
    if isinstance(store, S3Store):
        store.delete_many(keys)
    else:
        each(store.delete, list(dict.fromkeys(keys)))


def as_store(store_or_client: Any, bucket: str) -> ObjectStore:
    """``store_or_client`` as a store of ``bucket``: an :class:`ObjectStore` as is, anything
    else (a boto3 S3 client, a test's fake of one) as an :class:`S3Store`."""
    if isinstance(store_or_client, ObjectStore):
        return store_or_client
    return S3Store(store_or_client, bucket)


def is_conflict(exc: BaseException, *, if_match: bool = False) -> bool:
    """True when a conditional PUT was refused because the condition failed.

    ``if_match``: the PUT carried ``If-Match``, so AWS's 404 for a missing key is a conflict too
    (the object the writer expected is gone: someone else moved it).
    """
    code, status = _code(exc), _status(exc)
    if code in _CONFLICT_CODES or status in (409, 412):
        return True
    return if_match and (code in ("NoSuchKey", "404") or status == 404)
