"""Staged data files: uploads that tasks start and only the job's commit completes (S3 multipart
uploads, ADLS uncommitted blocks: ``object_store.py``).

Why (Hadoop S3A's "magic" committer, in small): an S3 object becomes visible only when its upload
completes. A task therefore uploads its file's parts and stops there; its commit message carries
the key, the upload id and the part ETags, never a secret. The driver completes the reported
uploads on commit and aborts them on abort. Either way it then sweeps every upload still pending
under the table whose key carries the job's write id (``ListMultipartUploads`` by prefix), so an
attempt that failed, was a duplicate, or finished after the job ended never shows a row.

What stays non-atomic: completing N uploads is N calls, so a reader listing during a commit can
see some of the job's files and not others.
"""

from __future__ import annotations

import contextlib
import io
from collections.abc import Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from lakegate_client.tables.directory import write_id_of
from lakegate_client.tables.object_store import PendingUpload, as_store

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = ["PendingUpload", "S3Location", "StagedWriter", "abort_uploads", "complete_uploads",
           "pending_uploads", "sweep_uploads"]

PART_BYTES = 8 * 1024 * 1024  # S3 wants >= 5 MiB for every part but the last
COMPLETE_WORKERS = 8  # below botocore's default connection pool (10)


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


class StagedWriter(io.RawIOBase):
    """A write-only file whose bytes go to parts of one staged upload (never completed here).

    Memory stays at one part. ``finish()`` stages the last part and returns the
    :class:`PendingUpload`; ``discard()`` abandons the upload (a failed task leaves nothing
    visible). ``s3``: an :class:`~lakegate_client.tables.object_store.ObjectStore` or a boto3
    S3 client.
    """

    def __init__(self, s3: Any, bucket: str, key: str) -> None:
        super().__init__()
        self._store, self._key = as_store(s3, bucket), key
        self._upload_id: str = self._store.start_staged(key)
        self._buffer = bytearray()
        self._parts: list[tuple[int, str]] = []
        self._size = 0

    @property
    def upload_id(self) -> str:
        return self._upload_id

    def writable(self) -> bool:
        return True

    def write(self, data: Any) -> int:
        chunk = bytes(data)
        self._buffer += chunk
        self._size += len(chunk)
        while len(self._buffer) >= PART_BYTES:
            self._upload(bytes(self._buffer[:PART_BYTES]))
            del self._buffer[:PART_BYTES]
        return len(chunk)

    def _upload(self, body: bytes) -> None:
        number = len(self._parts) + 1
        self._parts.append((number, self._store.stage_part(self._key, self._upload_id, number,
                                                           body)))

    def finish(self) -> PendingUpload:
        """Stage what is buffered as the last part; the upload stays pending."""
        if self._buffer or not self._parts:
            self._upload(bytes(self._buffer))
            self._buffer.clear()
        return PendingUpload(self._key, self._upload_id, tuple(self._parts), self._size)

    def discard(self) -> None:
        """Abandon the upload (best effort: the job's sweep catches what this misses)."""
        with contextlib.suppress(Exception):
            self._store.abandon_staged(self._key, self._upload_id)


def stage_parquet(
    s3: Any, bucket: str, key: str, schema: pa.Schema, batches: Iterable[pa.RecordBatch]
) -> PendingUpload:
    """Stream batches into one Parquet file staged as a pending upload at ``key``."""
    import pyarrow.parquet as pq

    sink = StagedWriter(s3, bucket, key)
    try:
        with pq.ParquetWriter(sink, schema) as writer:
            for batch in batches:
                writer.write_batch(batch)
        return sink.finish()
    except BaseException:
        sink.discard()
        raise


def complete_uploads(s3: Any, bucket: str, uploads: Sequence[PendingUpload],
                     workers: int = COMPLETE_WORKERS) -> None:
    """Make the uploads visible objects (one call each: not atomic across files), ``workers``
    at a time (a store is thread-safe). Every upload is tried; then the first error, if any,
    is raised."""
    store = as_store(s3, bucket)
    if len(uploads) <= 1 or workers <= 1:
        for up in uploads:
            store.complete_staged(up)
        return
    with ThreadPoolExecutor(max_workers=min(workers, len(uploads)),
                            thread_name_prefix="lakegate-complete") as pool:
        futures = [pool.submit(store.complete_staged, up) for up in uploads]
    for future in futures:
        future.result()


def abort_uploads(s3: Any, bucket: str, uploads: Iterable[tuple[str, str]]) -> int:
    """Abandon ``(key, upload_id)`` pairs; an upload already gone is fine. Returns how many."""
    store = as_store(s3, bucket)
    return sum(store.abandon_staged(key, upload_id) for key, upload_id in uploads)


def pending_uploads(s3: Any, where: S3Location) -> Iterator[tuple[str, str]]:
    """Every pending upload under the table: ``(key, upload_id)`` (all pages; raises
    :class:`~lakegate_client.tables.object_store.StagingListDenied` when the credential may
    not list them)."""
    return as_store(s3, where.bucket).pending_staged(f"{where.prefix}/")


def sweep_uploads(s3: Any, where: S3Location, write_id: str, keep: Iterable[str] = ()) -> int:
    """Abandon the job's pending uploads (by write id in the key name) except ``keep`` ids
    (none on a store whose abandon removes nothing: ADLS, whose garbage collection does)."""
    if not as_store(s3, where.bucket).abandon_removes:
        return 0
    kept = set(keep)
    doomed = [
        (key, uid)
        for key, uid in pending_uploads(s3, where)
        if uid not in kept and write_id_of(where.relative(key)) == write_id
    ]
    return abort_uploads(s3, where.bucket, doomed)
