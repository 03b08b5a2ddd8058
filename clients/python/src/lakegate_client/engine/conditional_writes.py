"""Conditional PUTs on S3-compatible stores (and, through ``ObjectStore.put_if``, ADLS): what
counts as "refused", and whether a store honours them at all.

Why: every exclusion the writers rely on (the plain-table commit marker and intents, the Lance
create claim, the attempt ledger) is a PUT with ``If-None-Match: *`` or ``If-Match: <etag>``. A
store that ignores those headers (older SeaweedFS and MinIO releases, Backblaze B2, Alibaba OSS)
lets every such PUT succeed, so two writers both "win" and tear the table with no error at all.
Stores also refuse differently: 412 ``PreconditionFailed``; AWS adds 409
``ConditionalRequestConflict`` (a concurrent conditional write) and 404 ``NoSuchKey`` for
``If-Match`` on a missing key. All three mean "someone else got there first".

The writers also rely on a listing showing what was just written: recovery finds a dead job's
intent by listing, and the Lance attempt ledger's cleanups find the attempts' records by listing
and sweep those of jobs whose intent no longer shows (``attempts.py``). On a store whose listings
lag its PUTs, a sweep could take a live job's record for a dead one's and delete files a commit
uses.

:class:`ConditionalWriteProbe` proves both before a writer's first exclusive step on a bucket (a
probe object under the table's own prefix, which a vended credential may write), and remembers
the answer per endpoint and bucket for the life of the process.
"""

from __future__ import annotations

import logging
import threading
import uuid
from functools import lru_cache
from typing import Any

from lakegate_client._errors import UnsupportedStorageError
from lakegate_client.engine.stores import as_store
from lakegate_client.engine.stores.base import ObjectStore, is_conflict

__all__ = ["ACCEPT_RISK_OPTION", "ConditionalWriteProbe", "UnsafeStoreError", "is_conflict",
           "process_probe", "put_conditional"]

ACCEPT_RISK_OPTION = "accept_single_writer_risk"
PROBE_PREFIX = "_lakegate_probe-"
WRONG_ETAG = '"0x8D0123456789ABC"'  # no store's ETag for a fresh object (S3 hex, Azure 0x...)
log = logging.getLogger(__name__)


class UnsafeStoreError(UnsupportedStorageError):
    """The store does not refuse conflicting conditional writes: no exclusion would hold."""


def put_conditional(s3: Any, bucket: str, key: str, body: bytes, etag: str | None) -> str | None:
    """PUT ``key`` only if it is still at ``etag`` (``None``: only if absent); returns the new
    ETag, or None when the store refused (someone else wrote first). ``s3``: an
    :class:`~lakegate_client.engine.stores.base.ObjectStore` or a boto3 S3 client."""
    return as_store(s3, bucket).put_if(key, body, etag)


class ConditionalWriteProbe:
    """Checks, once per endpoint and bucket, that conflicting conditional PUTs are refused and
    that a listing shows an object just written."""

    def __init__(self) -> None:
        self._known: dict[tuple[str, str], str | None] = {}  # → None (honoured) or the failure
        self._lock = threading.Lock()

    def ensure(self, s3: Any, bucket: str, prefix: str, *, accept_risk: bool = False) -> None:
        """Raise :class:`UnsafeStoreError` unless the store refuses conflicting conditional
        PUTs and lists what was just written (``accept_risk``: log it and go on, for a store
        with one writer at a time)."""
        store = as_store(s3, bucket)
        endpoint = store.endpoint
        with self._lock:
            known = (endpoint, bucket) in self._known
            failure = self._known.get((endpoint, bucket))
        if not known:
            failure = self._probe(store, prefix)
            with self._lock:
                self._known[(endpoint, bucket)] = failure
        if failure is None:
            return
        message = (
            f"the object store at {endpoint or 'the default endpoint'} (bucket {bucket!r}) does "
            f"not keep the guarantees Lakegate's writers rely on: {failure}. Without refused "
            "conditional writes two jobs can both commit and tear a table silently; without "
            "listings that show what was just written, a cleanup can delete the files of a job "
            f"still running. Upgrade the store, or set the option {ACCEPT_RISK_OPTION}=true (Spark "
            "data source option, or accept_single_writer_risk=True in the client) only if one "
            "writer at a time is guaranteed by other means"
        )
        if not accept_risk:
            raise UnsafeStoreError(message)
        log.warning("%s; going on because %s is set", message, ACCEPT_RISK_OPTION)

    @staticmethod
    def _probe(store: ObjectStore, prefix: str) -> str | None:
        """Write a probe object under ``prefix``, list it, and try to overwrite it against the
        rules; returns what the store got wrong, or None."""
        key = f"{prefix.strip('/')}/{PROBE_PREFIX}{uuid.uuid4().hex}"
        first = store.put_if(key, b"probe-1", None)
        try:
            if first is None:
                return "a first If-None-Match: * PUT of a fresh key was refused"
            if key not in store.first_keys(key, 1):
                return "a listing right after a PUT did not show the new object"
            if store.put_if(key, b"probe-2", None) is not None:
                return "a second If-None-Match: * PUT of the same key succeeded"
            if store.put_if(key, b"probe-3", WRONG_ETAG) is not None:
                return "an If-Match PUT with a wrong ETag succeeded"
            if store.put_if(f"{key}-absent", b"probe-4", first) is not None:
                return "an If-Match PUT of a missing key succeeded"
            return None
        finally:
            for doomed in (key, f"{key}-absent"):
                try:
                    store.delete(doomed)
                except Exception:  # debris only (hidden by its "_" prefix): logged
                    log.warning("could not delete the probe object %s", doomed, exc_info=True)


@lru_cache(maxsize=1)
def process_probe() -> ConditionalWriteProbe:
    """The process's probe (its memory of which stores passed)."""
    return ConditionalWriteProbe()
