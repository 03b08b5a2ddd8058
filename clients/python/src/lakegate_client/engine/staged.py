"""Staged data files: uploads that tasks start and only the job's commit completes (S3 multipart
uploads, ADLS uncommitted blocks: ``stores/``).

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
from typing import TYPE_CHECKING, Any

from lakegate_client.engine import stores
from lakegate_client.engine.stores import as_store
from lakegate_client.engine.stores.base import PendingUpload, S3Location, StagingListDenied
from lakegate_client.tables.directory import write_id_of

if TYPE_CHECKING:
    import pyarrow as pa

    from lakegate_client import TableCredentials

__all__ = ["StagedWriter", "abort_recorded", "abort_uploads", "complete_uploads", "discard_staged",
           "pending_uploads", "sweep", "sweep_uploads"]

PART_BYTES = 8 * 1024 * 1024  # S3 wants >= 5 MiB for every part but the last
COMPLETE_WORKERS = 8  # below botocore's default connection pool (10)


class StagedWriter(io.RawIOBase):
    """A write-only file whose bytes go to parts of one staged upload (never completed here).

    Memory stays at one part. ``finish()`` stages the last part and returns the
    :class:`PendingUpload`; ``discard()`` abandons the upload (a failed task leaves nothing
    visible). ``s3``: an :class:`~lakegate_client.engine.stores.base.ObjectStore` or a boto3
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
    :class:`~lakegate_client.engine.stores.base.StagingListDenied` when the credential may
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


def sweep(s3: Any, where: S3Location, write_id: str, keep: Sequence[str] = ()) -> int:
    """Abort the job's pending uploads left by failed, duplicate or late attempts.

    Lakekeeper's session policy grants no ``s3:ListBucketMultipartUploads``, so under a vended
    credential this listing is refused (AccessDenied): then nothing is swept here, and those
    invisible uploads wait for the bucket's ``AbortIncompleteMultipartUpload`` lifecycle rule.
    A read-write ADLS SAS may list staged blobs, so there the sweep runs. Returns how many
    uploads were aborted (-1: listing refused).
    """
    try:
        return sweep_uploads(s3, where, write_id, keep)
    except StagingListDenied:
        return -1


def discard_staged(s3: Any, where: S3Location, uploads: Sequence[PendingUpload],
                   write_id: str) -> None:
    """Abort reported uploads, then sweep the job's others (abort and failed commits)."""
    abort_uploads(s3, where.bucket, [(u.key, u.upload_id) for u in uploads])
    sweep(s3, where, write_id)


def abort_recorded(creds: TableCredentials, intent: dict[str, Any]) -> None:
    """Abort the uploads a fenced intent recorded (completed ones are files, deleted apart;
    abandoning never touches them)."""
    uploads = [(str(k), str(u)) for k, u in intent.get("uploads", ())]
    if uploads and stores.stages(creds):
        abort_uploads(stores.table_store(creds), S3Location.parse(creds.location).bucket, uploads)

