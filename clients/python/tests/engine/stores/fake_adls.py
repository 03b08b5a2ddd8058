"""An in-memory ADLS container answering as Azure's Blob API does, as an ``ObjectStore``.

Why: the plain-table commit runs on ADLS through ``AzureBlobStore``; its crash points are
enumerated here without a server (``test_plain_crash_points.py``), the same way as on FakeS3.
The integration tests run ``AzureBlobStore`` itself against Azurite.

Azure's behaviour that matters to the protocol, which it copies:

- An ETag changes on every write, also when the bytes are the same (S3's is the MD5).
- ``put_if(key, body, None)`` on an existing blob: 409 ``BlobAlreadyExists``; ``If-Match`` with a
  wrong ETag or on a missing blob: 412 ``ConditionNotMet`` (both a refusal: None).
- Staged blocks are invisible (not listed, ``get``/``head`` find nothing); a completion (Put
  Block List with ``If-None-Match: *``) publishes them, and completing again is a 409, i.e.
  done. Abandoning (HEAD, then Delete Blob) hides a staged blob from listings but, as on
  Azurite, leaves its blocks committable: the protocol must never complete what it gave up.

Faults, ``view()``, ``calls``, ``killed`` and ``on_stall`` work as in ``fake_s3.FakeS3``.
"""

from __future__ import annotations

import base64
import itertools
import threading
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from lakegate_client.engine.stores.adls import AzureBlobStore, AzureStoreError
from lakegate_client.engine.stores.base import PendingUpload

from .fake_s3 import Fault, take_call


@dataclass
class _Container:
    """The container's state, shared by every client (``view``) of one FakeAdls."""

    objects: dict[str, bytes] = field(default_factory=dict)
    etags: dict[str, str] = field(default_factory=dict)
    blocks: dict[str, dict[str, bytes]] = field(default_factory=dict)  # key → block id → bytes
    hidden: set[str] = field(default_factory=set)  # staged blobs deleted (blocks still there)
    ids: Any = field(default_factory=lambda: itertools.count(1))
    lock: threading.RLock = field(default_factory=threading.RLock)


class FakeAdls:
    """One container's blobs and uncommitted blocks."""

    abandon_removes = True

    def __init__(self, *, faults: dict[int, Fault] | None = None,
                 _container: _Container | None = None) -> None:
        self._c = _container if _container is not None else _Container()
        self.faults: dict[int, Fault] = dict(faults or {})
        self.calls: list[tuple[str, str]] = []
        self.killed = False
        self.on_stall: Callable[[], None] = lambda: None

    def view(self, *, faults: dict[int, Fault] | None = None) -> FakeAdls:
        """Another client (a fresh process) on the same container."""
        return FakeAdls(faults=faults, _container=self._c)

    @property
    def endpoint(self) -> str:
        return "http://fake-adls/devstoreaccount1"

    @property
    def bucket(self) -> str:
        return "b"

    @property
    def objects(self) -> dict[str, bytes]:
        return self._c.objects

    @property
    def blocks(self) -> dict[str, dict[str, bytes]]:
        return self._c.blocks

    def _etag(self, key: str) -> str:
        """The blob's ETag (one is made up for a blob a test seeded directly)."""
        with self._c.lock:
            if key not in self._c.etags:
                self._c.etags[key] = f'"0x8D{next(self._c.ids):013X}"'
            return self._c.etags[key]

    def _write(self, key: str, body: bytes) -> str:
        with self._c.lock:
            self._c.objects[key] = body
            self._c.etags[key] = f'"0x8D{next(self._c.ids):013X}"'
            return self._c.etags[key]

    def _call(self, op: str, key: str) -> Fault | None:
        fault = take_call(self, self._c.lock, op, key)
        if fault is None or fault.after:
            return fault
        raise AzureStoreError(op, fault.status, fault.code)

    @staticmethod
    def _answer(fault: Fault | None, op: str) -> None:
        if fault is not None:
            raise AzureStoreError(op, fault.status, fault.code)

    def put(self, key: str, body: bytes) -> str:
        fault = self._call("PutBlob", key)
        etag = self._write(key, body)
        self._answer(fault, "PutBlob")
        return etag

    def put_if(self, key: str, body: bytes, etag: str | None) -> str | None:
        fault = self._call("PutBlob", key)
        with self._c.lock:
            exists = key in self._c.objects
            refused = (etag is None and exists) or (
                etag is not None and (not exists or self._etag(key) != etag))
            new = None if refused else self._write(key, body)
        self._answer(fault, "PutBlob")
        return new  # None: 409 BlobAlreadyExists / 412 ConditionNotMet

    def get(self, key: str) -> tuple[bytes, str] | None:
        fault = self._call("GetBlob", key)
        with self._c.lock:
            found = (self._c.objects[key], self._etag(key)) if key in self._c.objects else None
        self._answer(fault, "GetBlob")
        return found

    def head(self, key: str) -> str | None:
        fault = self._call("GetBlobProperties", key)
        with self._c.lock:
            found = self._etag(key) if key in self._c.objects else None
        self._answer(fault, "GetBlobProperties")
        return found

    def delete(self, key: str) -> None:
        fault = self._call("DeleteBlob", key)
        with self._c.lock:
            self._c.objects.pop(key, None)
            self._c.etags.pop(key, None)
        self._answer(fault, "DeleteBlob")

    def list(self, prefix: str) -> dict[str, str]:
        fault = self._call("ListBlobs", prefix)
        with self._c.lock:
            out = {k: self._etag(k) for k in sorted(self._c.objects) if k.startswith(prefix)}
        self._answer(fault, "ListBlobs")
        return out

    def first_keys(self, prefix: str, limit: int) -> tuple[str, ...]:
        return tuple(self.list(prefix))[:limit]  # one List Blobs, in name order

    def start_staged(self, key: str) -> str:
        return uuid.uuid4().hex  # no call, as on Azure

    def stage_part(self, key: str, upload_id: str, number: int, body: bytes) -> str:
        fault = self._call("PutBlock", key)
        block = AzureBlobStore.block_id(upload_id, number)
        with self._c.lock:
            self._c.blocks.setdefault(key, {})[block] = body
        self._answer(fault, "PutBlock")
        return block

    def complete_staged(self, upload: PendingUpload) -> None:
        fault = self._call("PutBlockList", upload.key)
        with self._c.lock:
            if upload.key not in self._c.objects:  # If-None-Match: *; 409 means done before
                staged = self._c.blocks.get(upload.key, {})
                if any(block not in staged for _, block in upload.parts):
                    raise AzureStoreError("PutBlockList", 400, "InvalidBlockList")
                self._write(upload.key, b"".join(staged[b] for _, b in upload.parts))
                self._c.blocks.pop(upload.key, None)
                self._c.hidden.discard(upload.key)
        self._answer(fault, "PutBlockList")

    def abandon_staged(self, key: str, upload_id: str) -> bool:
        if self.head(key) is not None:
            return False
        fault = self._call("DeleteBlob", key)
        with self._c.lock:
            staged = key in self._c.blocks and key not in self._c.hidden
            self._c.hidden.add(key)
        self._answer(fault, "DeleteBlob")
        return staged

    def pending_staged(self, prefix: str) -> Iterator[tuple[str, str]]:
        committed = self.list(prefix)
        fault = self._call("ListBlobs", prefix)  # include=uncommittedblobs
        with self._c.lock:
            pending = sorted(k for k, b in self._c.blocks.items() if k.startswith(prefix)
                             and b and k not in self._c.hidden)
        self._answer(fault, "ListBlobs")
        for key in pending:
            if key in committed:
                continue
            fault = self._call("GetBlockList", key)
            with self._c.lock:
                first = next(iter(self._c.blocks.get(key, {})), None)
            self._answer(fault, "GetBlockList")
            if first is not None:
                yield key, base64.b64decode(first).decode().rsplit("-", 1)[0]
