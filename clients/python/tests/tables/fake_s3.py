"""An in-memory S3 with the calls the write protocol uses (objects, conditional PUT, multipart).

Why: the commit protocol's decisions (conflict or not, what is visible when) are checked here
without a server; the e2e tests run the same code against SeaweedFS.
"""

from __future__ import annotations

import hashlib
import itertools
from typing import Any

import botocore.exceptions


class _Body:
    def __init__(self, data: bytes) -> None:
        self._data = data

    def read(self) -> bytes:
        return self._data


def _error(code: str, status: int) -> botocore.exceptions.ClientError:
    return botocore.exceptions.ClientError(
        {"Error": {"Code": code}, "ResponseMetadata": {"HTTPStatusCode": status}}, "op"
    )


class _Exceptions:
    ClientError = botocore.exceptions.ClientError

    class NoSuchKey(botocore.exceptions.ClientError):
        pass

    class NoSuchUpload(botocore.exceptions.ClientError):
        pass


class FakeS3:
    """One bucket's objects and pending uploads; ``deny_list_uploads`` mimics the session policy."""

    exceptions = _Exceptions

    def __init__(self, *, deny_list_uploads: bool = False) -> None:
        self.objects: dict[str, bytes] = {}
        self.uploads: dict[str, tuple[str, dict[int, bytes]]] = {}
        self.deny_list_uploads = deny_list_uploads
        self._ids = itertools.count(1)

    @staticmethod
    def etag(data: bytes) -> str:
        return '"' + hashlib.md5(data).hexdigest() + '"'  # noqa: S324 - S3's ETag

    def put_object(self, *, Bucket: str, Key: str, Body: bytes, **cond: str) -> dict[str, Any]:
        current = self.objects.get(Key)
        if "IfNoneMatch" in cond and current is not None:
            raise _error("PreconditionFailed", 412)
        if "IfMatch" in cond and (current is None or self.etag(current) != cond["IfMatch"]):
            raise _error("PreconditionFailed", 412)
        self.objects[Key] = Body
        return {"ETag": self.etag(Body)}

    def get_object(self, *, Bucket: str, Key: str) -> dict[str, Any]:
        if Key not in self.objects:
            raise _Exceptions.NoSuchKey({"Error": {"Code": "NoSuchKey"}}, "GetObject")
        data = self.objects[Key]
        return {"Body": _Body(data), "ETag": self.etag(data)}

    def delete_object(self, *, Bucket: str, Key: str) -> dict[str, Any]:
        self.objects.pop(Key, None)
        return {}

    def list_objects_v2(self, *, Bucket: str, Prefix: str, **_: str) -> dict[str, Any]:
        contents = [{"Key": k, "ETag": self.etag(v)} for k, v in sorted(self.objects.items())
                    if k.startswith(Prefix)]
        return {"Contents": contents, "IsTruncated": False}

    def create_multipart_upload(self, *, Bucket: str, Key: str) -> dict[str, Any]:
        upload_id = f"u{next(self._ids)}"
        self.uploads[upload_id] = (Key, {})
        return {"UploadId": upload_id}

    def upload_part(self, *, Bucket: str, Key: str, UploadId: str, PartNumber: int,
                    Body: bytes) -> dict[str, Any]:
        self.uploads[UploadId][1][PartNumber] = Body
        return {"ETag": self.etag(Body)}

    def complete_multipart_upload(self, *, Bucket: str, Key: str, UploadId: str,
                                  MultipartUpload: dict[str, Any]) -> dict[str, Any]:
        if UploadId not in self.uploads:
            raise _Exceptions.NoSuchUpload({"Error": {"Code": "NoSuchUpload"}}, "Complete")
        _, parts = self.uploads.pop(UploadId)
        self.objects[Key] = b"".join(parts[p["PartNumber"]] for p in MultipartUpload["Parts"])
        return {}

    def abort_multipart_upload(self, *, Bucket: str, Key: str, UploadId: str) -> dict[str, Any]:
        if UploadId not in self.uploads:
            raise _Exceptions.NoSuchUpload({"Error": {"Code": "NoSuchUpload"}}, "Abort")
        del self.uploads[UploadId]
        return {}

    def list_multipart_uploads(self, *, Bucket: str, Prefix: str, **_: str) -> dict[str, Any]:
        if self.deny_list_uploads:
            raise _error("AccessDenied", 403)
        ups = [{"Key": k, "UploadId": u} for u, (k, _) in self.uploads.items()
               if k.startswith(Prefix)]
        return {"Uploads": ups, "IsTruncated": False}
