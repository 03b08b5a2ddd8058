"""An in-memory GCS JSON API behind the real :class:`GcsStore` (an ``httpx.MockTransport``), with
the call log and faults of ``fake_s3.FakeS3``, for the crash-point enumeration on GCS.

Why at the HTTP level: the enumeration then runs the store's own code (status handling, the
compose tree, "already completed" detection) under every failure, not a stand-in for it.

``honours_compose_conditions=False`` plays fake-gcs-server, whose compose ignores
``ifGenerationMatch`` (tests/integration/devstack/test_fake_gcs_facts.py); uploads honour it on
both, as on the real binary (``honours_upload_conditions=False``: a store that ignores them, as
fake-gcs-server's media uploads do, for the conditional-writes probe to refuse).

A fault at call ``n``: a 503 before the effect ("error"), after it ("lost"), a kill (that call
and every later one raise :class:`Killed`) or a stall.
"""

from __future__ import annotations

import itertools
import json
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote

import httpx

from lakegate_client.engine.stores.base import PendingUpload
from lakegate_client.engine.stores.gcs import GcsStore

from .fake_s3 import Fault, take_call


@dataclass
class _State:
    """The bucket, shared by every view (process) of one FakeGcs: name -> (bytes, generation)."""

    objects: dict[str, tuple[bytes, int]] = field(default_factory=dict)
    generations: Any = field(default_factory=lambda: itertools.count(1_700_000_000_000_000))
    lock: threading.RLock = field(default_factory=threading.RLock)


def _json(status: int, body: dict[str, Any]) -> httpx.Response:
    return httpx.Response(status, json=body)


def _error(status: int, message: str) -> httpx.Response:
    return _json(status, {"error": {"code": status, "message": message}})


class FakeGcs:
    """One bucket, one process's view of it; an ObjectStore (the real GcsStore inside)."""

    abandon_removes = True

    def __init__(self, *, honours_compose_conditions: bool = True,
                 honours_upload_conditions: bool = True,
                 faults: dict[int, Fault] | None = None, _state: _State | None = None) -> None:
        self._state = _state if _state is not None else _State()
        self.honours_compose_conditions = honours_compose_conditions
        self.honours_upload_conditions = honours_upload_conditions
        self.faults: dict[int, Fault] = dict(faults or {})
        self.calls: list[tuple[str, str]] = []
        self.killed = False
        self.on_stall: Callable[[], None] = lambda: None
        client = httpx.Client(transport=httpx.MockTransport(self._handle))
        self._store = GcsStore("http://fake-gcs", "b", "token", http=client)

    def view(self, *, faults: dict[int, Fault] | None = None) -> FakeGcs:
        return FakeGcs(honours_compose_conditions=self.honours_compose_conditions,
                       honours_upload_conditions=self.honours_upload_conditions,
                       faults=faults, _state=self._state)

    @property
    def objects(self) -> dict[str, bytes]:
        with self._state.lock:
            return {k: v for k, (v, _) in self._state.objects.items()}

    def seed(self, key: str, data: bytes) -> None:
        """Put an object without a call (the scenario's starting table)."""
        with self._state.lock:
            self._state.objects[key] = (data, next(self._state.generations))

    # -- the HTTP side ------------------------------------------------------------------------

    def _call(self, op: str, key: str) -> Fault | None:
        return take_call(self, self._state.lock, op, key)

    def _handle(self, request: httpx.Request) -> httpx.Response:
        path = request.url.path
        query = dict(request.url.params)
        if path.startswith("/upload/storage/v1/b/b/o"):
            name, data = _multipart(request)
            return self._faulted("Upload", name, query, lambda: self._upload(name, data, query))
        rest = path.removeprefix("/storage/v1/b/b/o")
        if not rest or rest == "/":
            prefix = query.get("prefix", "")
            limit = int(query.get("maxResults", 0)) or None
            return self._faulted("List", prefix, query, lambda: self._list(prefix, limit))
        name = unquote(rest.lstrip("/"))
        if request.method == "POST" and name.endswith("/compose"):
            name = name[: -len("/compose")]
            body = json.loads(request.content)
            return self._faulted("Compose", name, query,
                                 lambda: self._compose(name, body, query))  # fmt: skip
        if request.method == "DELETE":
            return self._faulted("Delete", name, query, lambda: self._delete(name))
        if query.get("alt") == "media":
            return self._faulted("Get", name, query, lambda: self._get(name))
        return self._faulted("Metadata", name, query, lambda: self._metadata(name))

    def _faulted(self, op: str, name: str, query: dict[str, str],
                 effect: Callable[[], httpx.Response]) -> httpx.Response:  # fmt: skip
        fault = self._call(op, name)
        if fault is not None and not fault.after:
            return _error(fault.status, fault.code)
        with self._state.lock:
            answer = effect()
        if fault is not None:
            return _error(fault.status, fault.code)
        return answer

    def _precondition(self, name: str, query: dict[str, str]) -> bool:
        if "ifGenerationMatch" not in query:
            return True
        want = int(query["ifGenerationMatch"])
        current = self._state.objects.get(name)
        return current is None if want == 0 else current is not None and current[1] == want

    def _write(self, name: str, data: bytes) -> httpx.Response:
        generation = next(self._state.generations)
        self._state.objects[name] = (data, generation)
        return _json(200, {"name": name, "generation": str(generation), "size": str(len(data))})

    def _upload(self, name: str, data: bytes, query: dict[str, str]) -> httpx.Response:
        if self.honours_upload_conditions and not self._precondition(name, query):
            return _error(412, "conditionNotMet")
        return self._write(name, data)

    def _compose(self, name: str, body: dict[str, Any], query: dict[str, str]) -> httpx.Response:
        sources = [s["name"] for s in body["sourceObjects"]]
        if len(sources) > 32 or not sources:
            return _error(400, "bad sources")
        if any(s not in self._state.objects for s in sources):
            return _error(404, "source not found")
        if self.honours_compose_conditions and not self._precondition(name, query):
            return _error(412, "conditionNotMet")
        return self._write(name, b"".join(self._state.objects[s][0] for s in sources))

    def _delete(self, name: str) -> httpx.Response:
        if self._state.objects.pop(name, None) is None:
            return _error(404, "not found")
        return httpx.Response(204)

    def _get(self, name: str) -> httpx.Response:
        found = self._state.objects.get(name)
        if found is None:
            return _error(404, "not found")
        return httpx.Response(200, content=found[0], headers={"x-goog-generation": str(found[1])})

    def _metadata(self, name: str) -> httpx.Response:
        found = self._state.objects.get(name)
        if found is None:
            return _error(404, "not found")
        return _json(200, {"name": name, "generation": str(found[1])})

    def _list(self, prefix: str, limit: int | None = None) -> httpx.Response:
        items = [{"name": k, "generation": str(g)}
                 for k, (_, g) in sorted(self._state.objects.items())
                 if k.startswith(prefix)]  # fmt: skip
        return _json(200, {"items": items[:limit]})  # one page (maxResults), as GCS pages

    # -- ObjectStore (the real store over this transport) ------------------------------------

    @property
    def endpoint(self) -> str:
        return self._store.endpoint

    @property
    def bucket(self) -> str:
        return self._store.bucket

    def put(self, key: str, body: bytes) -> str:
        return self._store.put(key, body)

    def put_if(self, key: str, body: bytes, etag: str | None) -> str | None:
        return self._store.put_if(key, body, etag)

    def get(self, key: str) -> tuple[bytes, str] | None:
        return self._store.get(key)

    def head(self, key: str) -> str | None:
        return self._store.head(key)

    def delete(self, key: str) -> None:
        self._store.delete(key)

    def list(self, prefix: str) -> dict[str, str]:
        return self._store.list(prefix)

    def first_keys(self, prefix: str, limit: int) -> tuple[str, ...]:
        return self._store.first_keys(prefix, limit)

    def start_staged(self, key: str) -> str:
        return self._store.start_staged(key)

    def stage_part(self, key: str, upload_id: str, number: int, body: bytes) -> str:
        return self._store.stage_part(key, upload_id, number, body)

    def complete_staged(self, upload: PendingUpload) -> None:
        self._store.complete_staged(upload)

    def abandon_staged(self, key: str, upload_id: str) -> bool:
        return self._store.abandon_staged(key, upload_id)

    def pending_staged(self, prefix: str) -> Iterator[tuple[str, str]]:
        return self._store.pending_staged(prefix)


def _multipart(request: httpx.Request) -> tuple[str, bytes]:
    """(name, content) of the JSON multipart upload GcsStore sends."""
    boundary = request.headers["Content-Type"].split("boundary=", 1)[1].encode()
    parts = request.content.split(b"--" + boundary)
    meta = parts[1].split(b"\r\n\r\n", 1)[1].rsplit(b"\r\n", 1)[0]
    content = parts[2].split(b"\r\n\r\n", 1)[1]
    return str(json.loads(meta)["name"]), content[: -len(b"\r\n")]
