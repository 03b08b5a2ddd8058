"""The S3 store: :class:`S3Store` over a boto3 client, and the process's cached boto3 clients.

Staging is a multipart upload that only the driver completes; a conditional PUT is
``If-None-Match``/``If-Match``; batches of deletes go through ``DeleteObjects`` where the endpoint
allows it (:class:`BatchDeletes`).
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from lakegate_client.engine.stores.base import (
    PendingUpload,
    StagingListDenied,
    each,
    error_code,
    error_status,
    is_conflict,
)

if TYPE_CHECKING:
    from lakegate_client import TableCredentials

__all__ = ["BATCH_DELETE_MAX", "BatchDeletes", "S3Store", "process_batch_deletes", "s3_client"]

BATCH_DELETE_MAX = 1_000  # S3's limit of keys per DeleteObjects
log = logging.getLogger(__name__)


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
            if error_status(exc) == 404 or error_code(exc) in ("404", "NoSuchKey", "NotFound"):
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
                if error_code(exc) == "AccessDenied":
                    raise StagingListDenied(str(exc)) from exc
                raise
            for upload in page.get("Uploads", ()):
                yield str(upload["Key"]), str(upload["UploadId"])
            if not page.get("IsTruncated"):
                return
            kwargs["KeyMarker"] = str(page.get("NextKeyMarker", ""))
            kwargs["UploadIdMarker"] = str(page.get("NextUploadIdMarker", ""))


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
        status = error_status(exc)
        if status >= 500 and status != 501:
            return
        with self._lock:
            known = endpoint in self._refused
            self._refused.add(endpoint)
        if not known:
            log.info("the store at %s refused DeleteObjects (%s %s): deleting one object at a "
                     "time there", endpoint or "(default endpoint)", status, error_code(exc))


@lru_cache(maxsize=1)
def process_batch_deletes() -> BatchDeletes:
    """The process's memory of refusing endpoints (like the conditional-writes probe's)."""
    return BatchDeletes()


def s3_client(creds: TableCredentials) -> Any:
    """A boto3 S3 client on the credential, made once per process and credential.

    Why cached: building a boto3 client loads botocore's service model, 0.3-0.5 s of CPU on a
    busy 2-core node, once per task and several times per commit (issue 36). A client is
    thread-safe and bound to exactly these keys, so a refreshed credential gets its own client
    and an old one is only ever reused with the keys it was vended with.
    """
    kwargs = creds.boto3_kwargs()
    config = kwargs.pop("config", None)
    path_style = (getattr(config, "s3", None) or {}).get("addressing_style") == "path"
    return _client(tuple(sorted((k, str(v)) for k, v in kwargs.items() if v is not None)),
                   path_style, os.getpid())


@lru_cache(maxsize=16)
def _client(kwargs: tuple[tuple[str, str], ...], path_style: bool, pid: int) -> Any:
    """``pid``: a forked child builds its own (a client's connections are not fork-safe)."""
    from botocore.config import Config

    config = Config(s3={"addressing_style": "path"} if path_style else {"addressing_style": "auto"})
    options: dict[str, Any] = {**dict(kwargs), "config": config}
    session = _session(pid)
    with session.lock:  # a boto3 session is not thread-safe; its clients are
        return session.boto3.client("s3", **options)


@dataclass(frozen=True)
class _Session:
    boto3: Any
    lock: threading.Lock


@lru_cache(maxsize=1)
def _session(pid: int) -> _Session:
    """The process's one boto3 session, whose loader every client shares.

    Why one: a client built on a session of its own loads and keeps its own copy of the S3
    service model (0.2 s of CPU and some 35,000 objects). Every table's credential is a client
    of its own, so a long-lived Spark worker collected a model per table, and PySpark runs a
    full ``gc.collect()`` after every task: at 200 partitions that collection, not the write,
    was most of a task's time (issue 36). Clients of one session share the model.
    """
    import boto3

    return _Session(boto3.session.Session(), threading.Lock())

