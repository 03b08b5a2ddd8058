"""An in-memory S3 with the calls the write protocol uses (objects, conditional PUT, multipart).

Why: the commit protocol's decisions (conflict or not, what is visible when) are checked here
without a server; the e2e tests run the same code against SeaweedFS.

Beyond a well-behaved store it can play the stores the protocol must survive or refuse:

- ``honours_conditions=False``: ignores ``If-None-Match``/``If-Match`` (older SeaweedFS and
  MinIO, Backblaze B2, Alibaba OSS): every conditional PUT succeeds.
- ``aws_conflicts=True``: AWS's answers: 404 ``NoSuchKey`` to ``If-Match`` on a missing key (412
  otherwise); a fault may also answer 409 ``ConditionalRequestConflict``.
- ``lagging_listings=True``: a listing does not show keys PUT since the last
  ``settle_listings()`` (an eventually consistent store); GET and HEAD see them at once.
- ``calls``: every call, in order, as ``(operation, key)``.
- ``faults``: ``{n: Fault}``: call number ``n`` (1-based, counted on this client) fails with an
  error, or "kills" the process: that call and every later one raise :class:`Killed`, as if the
  driver had died there (nothing after it runs), or "stalls": ``on_stall()`` runs before the call
  (the process was paused there while the world moved on), then the call proceeds. ``view()``
  is a fresh client (a new process) on the same stored objects: the one that recovers.
"""

from __future__ import annotations

import hashlib
import itertools
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import botocore.exceptions


class _Body:
    def __init__(self, data: bytes) -> None:
        self._data = data

    def read(self) -> bytes:
        return self._data


def _error(code: str, status: int, op: str = "op") -> botocore.exceptions.ClientError:
    return botocore.exceptions.ClientError(
        {"Error": {"Code": code}, "ResponseMetadata": {"HTTPStatusCode": status}}, op
    )


class Killed(BaseException):
    """The simulated driver died at this call: nothing it would do afterwards happens."""


@dataclass(frozen=True)
class Fault:
    """What call ``n`` does instead of its work: ``kill``, or raise ``code``/``status``.

    ``after``: the call's effect happens first and only its answer is lost (an ambiguous
    failure: the client cannot tell whether the write landed).
    """

    kind: str = "error"  # "error" | "kill" | "stall"
    code: str = "ServiceUnavailable"
    status: int = 503
    after: bool = False


def take_call(fake: Any, lock: Any, op: str, key: str) -> Fault | None:
    """Record a call on a fake store (its ``calls``, ``faults``, ``killed``, ``on_stall``): a kill
    raises :class:`Killed` (and stays for good), a stall runs ``on_stall``. Returns the fault the
    call answers with (at once, or after its effect when ``fault.after``), or None."""
    with lock:
        if fake.killed:
            raise Killed(f"{op} {key} after the kill")
        fake.calls.append((op, key))
        fault: Fault | None = fake.faults.get(len(fake.calls))
    if fault is None:
        return None
    if fault.kind == "stall":
        fake.on_stall()
        return None
    if fault.kind == "kill":
        fake.killed = True
        raise Killed(f"killed at call {len(fake.calls)}: {op} {key}")
    return fault


class _Exceptions:
    ClientError = botocore.exceptions.ClientError

    class NoSuchKey(botocore.exceptions.ClientError):
        pass

    class NoSuchUpload(botocore.exceptions.ClientError):
        pass


@dataclass
class _Store:
    """The bucket's state, shared by every client (``view``) of one FakeS3."""

    objects: dict[str, bytes] = field(default_factory=dict)
    uploads: dict[str, tuple[str, dict[int, bytes]]] = field(default_factory=dict)
    ids: Any = field(default_factory=lambda: itertools.count(1))
    lock: threading.RLock = field(default_factory=threading.RLock)
    unlisted: set[str] = field(default_factory=set)  # ``lagging_listings``: not listed yet


class FakeS3:
    """One bucket's objects and pending uploads; ``deny_list_uploads`` mimics the session policy."""

    exceptions = _Exceptions

    def __init__(self, *, deny_list_uploads: bool = False, honours_conditions: bool = True,
                 aws_conflicts: bool = False, endpoint: str = "http://fake-s3",
                 faults: dict[int, Fault] | None = None, batch_deletes: bool = True,
                 lagging_listings: bool = False, _store: _Store | None = None) -> None:
        self._store = _store if _store is not None else _Store()
        self.lagging_listings = lagging_listings
        self.batch_deletes = batch_deletes
        self.deny_list_uploads = deny_list_uploads
        self.honours_conditions = honours_conditions
        self.aws_conflicts = aws_conflicts
        self.faults: dict[int, Fault] = dict(faults or {})
        self.calls: list[tuple[str, str]] = []
        self.killed = False
        self.on_stall: Callable[[], None] = lambda: None
        self.meta = SimpleNamespace(endpoint_url=endpoint)

    def view(self, *, faults: dict[int, Fault] | None = None) -> FakeS3:
        """Another client (a fresh process) on the same objects, same store behaviour."""
        return FakeS3(deny_list_uploads=self.deny_list_uploads,
                      honours_conditions=self.honours_conditions,
                      aws_conflicts=self.aws_conflicts, endpoint=str(self.meta.endpoint_url),
                      faults=faults, batch_deletes=self.batch_deletes,
                      lagging_listings=self.lagging_listings, _store=self._store)

    def settle_listings(self) -> None:
        """Listings catch up: every key PUT so far shows."""
        with self._store.lock:
            self._store.unlisted.clear()

    @property
    def objects(self) -> dict[str, bytes]:
        return self._store.objects

    @property
    def uploads(self) -> dict[str, tuple[str, dict[int, bytes]]]:
        return self._store.uploads

    @staticmethod
    def etag(data: bytes) -> str:
        return '"' + hashlib.md5(data).hexdigest() + '"'  # noqa: S324 - S3's ETag

    def _call(self, op: str, key: str) -> Fault | None:
        """Record the call; raise its fault (a kill stays for good); an ``after`` fault is
        returned for the call to raise once its effect is done."""
        fault = take_call(self, self._store.lock, op, key)
        if fault is None or fault.after:
            return fault
        raise _error(fault.code, fault.status, op)

    @staticmethod
    def _answer(fault: Fault | None, op: str, answer: dict[str, Any]) -> dict[str, Any]:
        if fault is not None:
            raise _error(fault.code, fault.status, op)
        return answer

    def put_object(self, *, Bucket: str, Key: str, Body: bytes, **cond: str) -> dict[str, Any]:
        fault = self._call("PutObject", Key)
        with self._store.lock:
            current = self.objects.get(Key)
            if self.honours_conditions:
                if "IfNoneMatch" in cond and current is not None:
                    raise _error("PreconditionFailed", 412, "PutObject")
                if "IfMatch" in cond and current is None and self.aws_conflicts:
                    raise _Exceptions.NoSuchKey(
                        {"Error": {"Code": "NoSuchKey"},
                         "ResponseMetadata": {"HTTPStatusCode": 404}}, "PutObject")
                if "IfMatch" in cond and (current is None or self.etag(current) != cond["IfMatch"]):
                    raise _error("PreconditionFailed", 412, "PutObject")
            self.objects[Key] = Body
            if self.lagging_listings:
                self._store.unlisted.add(Key)
        return self._answer(fault, "PutObject", {"ETag": self.etag(Body)})

    def get_object(self, *, Bucket: str, Key: str) -> dict[str, Any]:
        fault = self._call("GetObject", Key)
        with self._store.lock:
            if Key not in self.objects:
                raise _Exceptions.NoSuchKey({"Error": {"Code": "NoSuchKey"}}, "GetObject")
            data = self.objects[Key]
        return self._answer(fault, "GetObject", {"Body": _Body(data), "ETag": self.etag(data)})

    def head_object(self, *, Bucket: str, Key: str) -> dict[str, Any]:
        fault = self._call("HeadObject", Key)
        with self._store.lock:
            if Key not in self.objects:
                raise _error("404", 404, "HeadObject")
            data = self.objects[Key]
        return self._answer(fault, "HeadObject", {"ETag": self.etag(data),
                                                  "ContentLength": len(data)})

    def delete_object(self, *, Bucket: str, Key: str) -> dict[str, Any]:
        fault = self._call("DeleteObject", Key)
        with self._store.lock:
            self.objects.pop(Key, None)
        self.removed(Key)
        return self._answer(fault, "DeleteObject", {})

    def delete_objects(self, *, Bucket: str, Delete: dict[str, Any]) -> dict[str, Any]:
        """One call for many keys; ``batch_deletes=False``: refused as a store without it."""
        keys = [str(o["Key"]) for o in Delete["Objects"]]
        fault = self._call("DeleteObjects", keys[0] if keys else "")
        if not self.batch_deletes:
            raise _error("NotImplemented", 501, "DeleteObjects")
        with self._store.lock:
            for key in keys:
                self.objects.pop(key, None)
        for key in keys:
            self.removed(key)
        return self._answer(fault, "DeleteObjects", {})

    def removed(self, key: str) -> None:
        """A delete's effect beyond the bucket (a subclass's local files): none here."""

    def list_objects_v2(self, *, Bucket: str, Prefix: str, MaxKeys: int | None = None,
                        **_: str) -> dict[str, Any]:
        """One page: every key under ``Prefix``, or the first ``MaxKeys`` (then truncated, with
        no continuation: a caller that asks for a page reads one)."""
        fault = self._call("ListObjectsV2", Prefix)
        with self._store.lock:
            contents = [{"Key": k, "ETag": self.etag(v)} for k, v in sorted(self.objects.items())
                        if k.startswith(Prefix) and k not in self._store.unlisted]
        page = contents if MaxKeys is None else contents[:MaxKeys]
        return self._answer(fault, "ListObjectsV2",
                            {"Contents": page, "IsTruncated": len(page) < len(contents)})

    def create_multipart_upload(self, *, Bucket: str, Key: str) -> dict[str, Any]:
        fault = self._call("CreateMultipartUpload", Key)
        with self._store.lock:
            upload_id = f"u{next(self._store.ids)}"
            self.uploads[upload_id] = (Key, {})
        return self._answer(fault, "CreateMultipartUpload", {"UploadId": upload_id})

    def upload_part(self, *, Bucket: str, Key: str, UploadId: str, PartNumber: int,
                    Body: bytes) -> dict[str, Any]:
        fault = self._call("UploadPart", Key)
        with self._store.lock:
            self.uploads[UploadId][1][PartNumber] = Body
        return self._answer(fault, "UploadPart", {"ETag": self.etag(Body)})

    def complete_multipart_upload(self, *, Bucket: str, Key: str, UploadId: str,
                                  MultipartUpload: dict[str, Any]) -> dict[str, Any]:
        fault = self._call("CompleteMultipartUpload", Key)
        with self._store.lock:
            if UploadId not in self.uploads:
                raise _Exceptions.NoSuchUpload({"Error": {"Code": "NoSuchUpload"}}, "Complete")
            _, parts = self.uploads.pop(UploadId)
            self.objects[Key] = b"".join(parts[p["PartNumber"]] for p in MultipartUpload["Parts"])
        return self._answer(fault, "CompleteMultipartUpload", {})

    def abort_multipart_upload(self, *, Bucket: str, Key: str, UploadId: str) -> dict[str, Any]:
        fault = self._call("AbortMultipartUpload", Key)
        with self._store.lock:
            if UploadId not in self.uploads:
                raise _Exceptions.NoSuchUpload({"Error": {"Code": "NoSuchUpload"}}, "Abort")
            del self.uploads[UploadId]
        return self._answer(fault, "AbortMultipartUpload", {})

    def list_multipart_uploads(self, *, Bucket: str, Prefix: str, **_: str) -> dict[str, Any]:
        fault = self._call("ListMultipartUploads", Prefix)
        if self.deny_list_uploads:
            raise _error("AccessDenied", 403)
        with self._store.lock:
            ups = [{"Key": k, "UploadId": u} for u, (k, _) in self.uploads.items()
                   if k.startswith(Prefix)]
        return self._answer(fault, "ListMultipartUploads", {"Uploads": ups, "IsTruncated": False})
