"""``AzureBlobStore``: Azure's answers read as the write protocols need them, and the SAS never
in an error (the real Blob API is exercised on Azurite: tests/integration/storage)."""

from __future__ import annotations

from collections.abc import Callable

import httpx
import pytest

from lakegate_client.engine.stores.adls import AzureBlobStore, AzureStoreError
from lakegate_client.engine.stores.base import ObjectStore, PendingUpload

SAS = "sv=2021-08-06&sr=c&sp=racwdl&sig=SECRETSIG"


def _store(answer: Callable[[httpx.Request], httpx.Response]) -> AzureBlobStore:
    client = httpx.Client(transport=httpx.MockTransport(answer))
    return AzureBlobStore("http://azurite/devstoreaccount1", "wh", "?" + SAS, http=client)


def _error(status: int, code: str) -> httpx.Response:
    return httpx.Response(status, headers={"x-ms-error-code": code})


def test_it_is_an_object_store() -> None:
    assert isinstance(_store(lambda _r: httpx.Response(200)), ObjectStore)


@pytest.mark.parametrize(("status", "code", "etag", "refused"), [
    (409, "BlobAlreadyExists", None, True),  # If-None-Match: * on an existing blob
    (412, "ConditionNotMet", '"0x1"', True),  # If-Match, wrong ETag (Azurite: also missing)
    (404, "BlobNotFound", '"0x1"', True),  # If-Match on a missing blob
    (404, "ContainerNotFound", None, False),
    (409, "LeaseIdMissing", None, False),
    (503, "ServerBusy", '"0x1"', False),
])
def test_conditional_put_refusals(status: int, code: str, etag: str | None,
                                  refused: bool) -> None:
    seen: list[httpx.Request] = []

    def answer(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return _error(status, code)

    store = _store(answer)
    if refused:
        assert store.put_if("t/_lakegate_commit.json", b"{}", etag) is None
    else:
        with pytest.raises(AzureStoreError, match=code):
            store.put_if("t/_lakegate_commit.json", b"{}", etag)
    header = ("If-Match", etag) if etag else ("If-None-Match", "*")
    assert seen[0].headers[header[0]] == header[1]
    assert seen[0].headers["x-ms-blob-type"] == "BlockBlob"


def test_listing_etags_are_spelled_as_header_etags() -> None:
    listing = (b'<?xml version="1.0"?><EnumerationResults><Blobs><Blob><Name>t/a.parquet</Name>'
               b"<Properties><Etag>0x8DABC</Etag></Properties></Blob></Blobs><NextMarker/>"
               b"</EnumerationResults>")

    def answer(request: httpx.Request) -> httpx.Response:
        if request.method == "GET" and request.url.params.get("comp") == "list":
            return httpx.Response(200, content=listing)
        return httpx.Response(200, headers={"ETag": '"0x8DABC"'}, content=b"x")

    store = _store(answer)
    assert store.list("t/") == {"t/a.parquet": '"0x8DABC"'}
    assert store.get("t/a.parquet") == (b"x", '"0x8DABC"')


def test_a_staged_file_is_completed_once_with_its_blocks_and_a_second_completion_is_done() -> None:
    bodies: list[bytes] = []

    def answer(request: httpx.Request) -> httpx.Response:
        assert request.url.params["comp"] == "blocklist"
        assert request.headers["If-None-Match"] == "*"
        bodies.append(request.content)
        return httpx.Response(201) if len(bodies) == 1 else _error(409, "BlobAlreadyExists")

    store = _store(answer)
    block = AzureBlobStore.block_id("up1", 1)
    upload = PendingUpload("t/part-w1-00000-a.parquet", "up1", ((1, block),), 3)
    store.complete_staged(upload)
    store.complete_staged(upload)  # a recoverer's second completion
    assert f"<Latest>{block}</Latest>".encode() in bodies[0]


def test_completing_blocks_that_are_gone_raises() -> None:
    store = _store(lambda _r: _error(400, "InvalidBlockList"))
    with pytest.raises(AzureStoreError, match="InvalidBlockList"):
        store.complete_staged(PendingUpload("t/a", "up1", ((1, "YQ=="),), 1))


def test_block_ids_have_one_length_per_blob() -> None:
    assert len({len(AzureBlobStore.block_id("u" * 32, n)) for n in (1, 99, 123456)}) == 1


def test_no_error_carries_the_sas() -> None:
    def refused(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError(f"cannot reach {request.url}", request=request)

    with pytest.raises(AzureStoreError) as caught:
        _store(refused).get("t/a")
    assert "SECRETSIG" not in str(caught.value)
    assert caught.value.__cause__ is None
    assert caught.value.__suppress_context__
    with pytest.raises(AzureStoreError) as failed:
        _store(lambda _r: _error(403, "AuthenticationFailed")).delete("t/a")
    assert "SECRETSIG" not in str(failed.value)
    assert "AuthenticationFailed" in str(failed.value)


def test_abandoning_never_deletes_a_published_blob() -> None:
    seen: list[tuple[str, str]] = []

    def published(request: httpx.Request) -> httpx.Response:
        seen.append((request.method, request.headers.get("If-None-Match", "")))
        return httpx.Response(200, headers={"ETag": '"0x1"'})

    assert _store(published).abandon_staged("t/a", "up1") is False
    assert seen == [("HEAD", "")]  # a committed version exists: no delete at all

    def staged_only(request: httpx.Request) -> httpx.Response:
        seen.append((request.method, request.headers.get("If-None-Match", "")))
        return httpx.Response(404) if request.method == "HEAD" else httpx.Response(202)

    seen.clear()
    assert _store(staged_only).abandon_staged("t/a", "up1") is True
    assert seen == [("HEAD", ""), ("DELETE", "*")]
