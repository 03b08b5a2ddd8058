"""The object-store calls the write protocols make, as one small interface per store family.

Why: the plain-table commit (``formats/plain.py``), staged data files (``staged.py``), the
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
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Protocol, TypeVar, runtime_checkable

__all__ = ["ObjectStore", "PendingUpload", "S3Location", "StagingListDenied", "each",
           "error_code", "error_status", "is_conflict"]

_CONFLICT_CODES = frozenset({"PreconditionFailed", "412", "ConditionalRequestConflict", "409"})
WORKERS = 8  # calls in flight at once for one batch of single calls (below botocore's pool of 10)
T = TypeVar("T")
log = logging.getLogger(__name__)


@dataclass(frozen=True)
class S3Location:
    """A table's bucket (ADLS: container) and key prefix (no trailing slash)."""

    bucket: str
    prefix: str

    @classmethod
    def parse(cls, uri: str) -> S3Location:
        """``s3://bucket/a/b/`` → ``S3Location("bucket", "a/b")``; ADLS's
        ``abfss://container@account.host/a/b`` → ``S3Location("container", "a/b")``."""
        rest = uri.split("://", 1)[-1]
        bucket, _, key = rest.partition("/")
        return cls(bucket=bucket.split("@", 1)[0], prefix=key.strip("/"))

    def key(self, relative: str) -> str:
        return f"{self.prefix}/{relative}"

    def relative(self, key: str) -> str:
        return key[len(self.prefix) + 1 :]


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


def error_code(exc: BaseException) -> str:
    response = getattr(exc, "response", None) or {}
    return str(response.get("Error", {}).get("Code", ""))


def error_status(exc: BaseException) -> int:
    response = getattr(exc, "response", None) or {}
    return int(response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0) or 0)


def each(call: Callable[[str], T], items: Sequence[str]) -> list[T]:
    """``call`` on every item, :data:`WORKERS` at a time (the stores' clients are thread-safe);
    the first error raises once every call was tried."""
    if len(items) <= 1:
        return [call(item) for item in items]
    with ThreadPoolExecutor(max_workers=min(WORKERS, len(items)),
                            thread_name_prefix="lakegate-store") as pool:
        futures = [pool.submit(call, item) for item in items]
    return [future.result() for future in futures]


def is_conflict(exc: BaseException, *, if_match: bool = False) -> bool:
    """True when a conditional PUT was refused because the condition failed.

    ``if_match``: the PUT carried ``If-Match``, so AWS's 404 for a missing key is a conflict too
    (the object the writer expected is gone: someone else moved it).
    """
    code, status = error_code(exc), error_status(exc)
    if code in _CONFLICT_CODES or status in (409, 412):
        return True
    return if_match and (code in ("NoSuchKey", "404") or status == 404)
