"""GCS's XML API through the dev stack's guard, on the real fake-gcs-server: each call object_store
(Lance) makes, with GCS's semantics (preconditions atomic with the write, 412 on failure,
multipart parts invisible until completion, paginated lists, XML error bodies).

Without the guard's translation fake-gcs-server answers the simple PUT with 400 "invalid
uploadType" and knows none of the multipart calls (test_fake_gcs_refuses_the_xml_writes)."""

from __future__ import annotations

import hashlib
import uuid
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from urllib.parse import quote

import httpx
import pytest

from tests.integration import local_gcs as _local
from tests.integration.local_gcs import LocalGcs

pytestmark = pytest.mark.integration
local_gcs = _local.local_gcs  # the fixture

MIB = 1024 * 1024


@pytest.fixture
def prefix() -> str:
    return f"t/{uuid.uuid4().hex[:8]}"


@pytest.fixture
def http(local_gcs: LocalGcs, prefix: str) -> Iterator[httpx.Client]:
    auth = {"Authorization": f"Bearer {local_gcs.token(prefix)}"}
    with httpx.Client(base_url=f"{local_gcs.guard}/{local_gcs.bucket}", headers=auth,
                      trust_env=False, timeout=30) as client:  # fmt: skip
        yield client


def _parse(content: bytes) -> ET.Element:
    return ET.fromstring(content)  # noqa: S314 - the guard's own answer, in a test


def _key(name: str) -> str:
    return "/" + quote(name, safe="")  # object_store percent-encodes the whole object name


def _code(answer: httpx.Response) -> str:
    root = _parse(answer.content)
    assert root.tag == "Error"
    return root.findtext("Code") or ""


def _visible(http: httpx.Client, name: str) -> bytes | None:
    answer = http.get(_key(name))
    if answer.status_code == 404:
        assert _code(answer) == "NoSuchKey"
        return None
    assert answer.status_code == 200, answer.text
    return answer.content


def test_fake_gcs_refuses_the_xml_writes(local_gcs: LocalGcs, prefix: str) -> None:
    """Why the guard translates: fake-gcs-server itself (addressed as its public host, so its
    XML routes match) refuses the XML simple PUT, the multipart initiation and a part upload,
    and its XML list does not page."""
    host = {"Host": local_gcs.guard.removeprefix("http://")}
    base = f"{local_gcs.server}/{local_gcs.bucket}/{quote(prefix + '/a', safe='')}"
    put = httpx.put(base, content=b"x", headers=host, trust_env=False)
    assert put.status_code == 400
    assert "invalid uploadType" in put.text
    initiate = httpx.post(base, params={"uploads": ""}, headers=host, trust_env=False)
    assert initiate.status_code >= 400
    part = httpx.put(base, params={"partNumber": "1", "uploadId": "u"}, content=b"x",
                     headers=host, trust_env=False)  # fmt: skip
    assert part.status_code == 400
    # Its XML list (served for its public host) ignores max-keys: every key, no token.
    for leaf in ("a", "b", "c"):
        httpx.post(f"{local_gcs.server}/upload/storage/v1/b/{local_gcs.bucket}/o",
                   params={"uploadType": "media", "name": f"{prefix}/{leaf}"}, content=b"1",
                   trust_env=False)  # fmt: skip
    listing = httpx.get(f"{local_gcs.server}/{local_gcs.bucket}", headers=host, trust_env=False,
                        params={"list-type": "2", "prefix": f"{prefix}/", "max-keys": "1"})
    assert listing.status_code == 200
    root = _parse(listing.content)
    assert len([e for e in root.iter() if e.tag.endswith("Key")]) == 3
    assert root.findtext("{*}NextContinuationToken") is None


def test_put_writes_and_answers_like_gcs(http: httpx.Client, prefix: str) -> None:
    name = f"{prefix}/a.bin"
    put = http.put(_key(name), content=b"hello", headers={"Content-Type": "text/plain",
                                                          "x-goog-meta-k": "v"})  # fmt: skip
    assert put.status_code == 200, put.text
    assert put.headers["ETag"].startswith('"')
    generation = put.headers["x-goog-generation"]
    assert int(generation) > 0
    get = http.get(_key(name))
    assert get.content == b"hello"
    assert get.headers["x-goog-generation"] == generation
    assert get.headers["ETag"] == put.headers["ETag"]
    assert get.headers["Content-Type"].startswith("text/plain")
    assert get.headers["x-goog-meta-k"] == "v"
    ranged = http.get(_key(name), headers={"Range": "bytes=1-3"})
    assert (ranged.status_code, ranged.content) == (206, b"ell")
    head = http.head(_key(name))
    assert head.status_code == 200
    assert head.headers["Content-Length"] == "5"


def test_generation_preconditions_on_put_are_atomic_with_the_write(http, prefix) -> None:
    name = f"{prefix}/marker"
    create = {"x-goog-if-generation-match": "0"}
    first = http.put(_key(name), content=b"one", headers=create)
    assert first.status_code == 200
    again = http.put(_key(name), content=b"two", headers=create)
    assert again.status_code == 412
    assert _code(again) == "PreconditionFailed"
    assert _visible(http, name) == b"one"
    generation = first.headers["x-goog-generation"]
    stale = http.put(_key(name), content=b"three",
                     headers={"x-goog-if-generation-match": str(int(generation) + 1)})  # fmt: skip
    assert stale.status_code == 412
    update = http.put(_key(name), content=b"four",
                      headers={"x-goog-if-generation-match": generation})  # fmt: skip
    assert update.status_code == 200
    assert update.headers["x-goog-generation"] != generation
    assert _visible(http, name) == b"four"
    # The superseded generation no longer matches.
    late = http.put(_key(name), content=b"five", headers={"x-goog-if-generation-match": generation})
    assert late.status_code == 412
    assert _visible(http, name) == b"four"


def test_conditions_the_stand_in_cannot_enforce_are_refused_not_ignored(http, prefix) -> None:
    name = f"{prefix}/x"
    assert http.put(_key(name), content=b"x").status_code == 200
    for header in ("If-None-Match", "x-goog-if-metageneration-match"):
        answer = http.put(_key(name), content=b"y", headers={header: "*" if "None" in header
                                                             else "1"})  # fmt: skip
        assert answer.status_code == 501, header
        assert _code(answer) == "NotImplemented"
    deleted = http.delete(_key(name), headers={"x-goog-if-generation-match": "1"})
    assert deleted.status_code == 501
    assert _visible(http, name) == b"x"


def test_copy_if_absent(http: httpx.Client, local_gcs: LocalGcs, prefix: str) -> None:
    """object_store's copy_if_not_exists (Lance's rename commits): `x-goog-copy-source` with
    `x-goog-if-generation-match: 0`."""
    src, dst = f"{prefix}/src", f"{prefix}/dst"
    assert http.put(_key(src), content=b"payload").status_code == 200
    source = {"x-goog-copy-source": f"{local_gcs.bucket}/{quote(src, safe='')}",
              "x-goog-if-generation-match": "0"}  # fmt: skip
    copied = http.put(_key(dst), headers=source)
    assert copied.status_code == 200, copied.text
    assert _parse(copied.content).tag == "CopyObjectResult"
    assert _visible(http, dst) == b"payload"
    assert http.put(_key(src), content=b"changed").status_code == 200
    refused = http.put(_key(dst), headers=source)
    assert refused.status_code == 412
    assert _visible(http, dst) == b"payload"


def test_copy_source_outside_the_grant_is_refused(http, local_gcs, prefix) -> None:
    source = {"x-goog-copy-source": f"{local_gcs.bucket}/{quote('t/other/secret', safe='')}"}
    answer = http.put(_key(f"{prefix}/stolen"), headers=source)
    assert answer.status_code == 403
    assert _code(answer) == "AccessDenied"


def _initiate(http: httpx.Client, name: str, **headers: str) -> str:
    answer = http.post(_key(name), params={"uploads": ""}, headers=headers)
    assert answer.status_code == 200, answer.text
    upload_id = _parse(answer.content).findtext("{*}UploadId")
    assert upload_id
    return upload_id


def _part(http: httpx.Client, name: str, upload_id: str, number: int, data: bytes) -> str:
    answer = http.put(_key(name), params={"partNumber": str(number), "uploadId": upload_id},
                      content=data)  # fmt: skip
    assert answer.status_code == 200, answer.text
    assert answer.headers["ETag"] == f'"{hashlib.md5(data).hexdigest()}"'  # noqa: S324
    return answer.headers["ETag"]


def _complete(http: httpx.Client, name: str, upload_id: str, parts: list[tuple[int, str]],
              **headers: str) -> httpx.Response:  # fmt: skip
    body = "<CompleteMultipartUpload>" + "".join(
        f"<Part><PartNumber>{n}</PartNumber><ETag>{e}</ETag></Part>" for n, e in parts
    ) + "</CompleteMultipartUpload>"  # fmt: skip
    return http.post(_key(name), params={"uploadId": upload_id}, content=body, headers=headers)


def test_multipart_upload_is_invisible_until_completed(http: httpx.Client, prefix: str) -> None:
    name = f"{prefix}/big.bin"
    one, two = b"a" * (5 * MIB), b"tail"
    upload_id = _initiate(http, name, **{"Content-Type": "application/x-lance"})
    etag2 = _part(http, name, upload_id, 2, two)  # parts may arrive in any order
    etag1 = _part(http, name, upload_id, 1, one)
    assert _visible(http, name) is None
    listing = http.get("", params={"list-type": "2", "prefix": f"{prefix}/"})
    assert name not in listing.text
    done = _complete(http, name, upload_id, [(1, etag1), (2, etag2)])
    assert done.status_code == 200, done.text
    assert int(done.headers["x-goog-generation"]) > 0
    assert _parse(done.content).tag == "CompleteMultipartUploadResult"
    assert _visible(http, name) == one + two
    assert http.head(_key(name)).headers["Content-Type"].startswith("application/x-lance")
    # Completed: the upload is gone.
    again = _complete(http, name, upload_id, [(1, etag1), (2, etag2)])
    assert (again.status_code, _code(again)) == (404, "NoSuchUpload")


def test_multipart_completion_checks_gcs_rules(http: httpx.Client, prefix: str) -> None:
    name = f"{prefix}/rules.bin"
    upload_id = _initiate(http, name)
    small = _part(http, name, upload_id, 1, b"small")
    last = _part(http, name, upload_id, 2, b"last")
    cases = [
        ([(2, last), (1, small)], "InvalidPartOrder"),
        ([(1, '"00000000000000000000000000000000"')], "InvalidPart"),
        ([(3, last)], "InvalidPart"),
        ([(1, small), (2, last)], "EntityTooSmall"),
    ]
    for parts, code in cases:
        answer = _complete(http, name, upload_id, parts)
        assert (answer.status_code, _code(answer)) == (400, code), parts
    assert _visible(http, name) is None
    # Only the listed parts make the object; a part may be replaced before completion.
    _part(http, name, upload_id, 1, b"replaced")
    done = _complete(http, name, upload_id, [(1, f'"{hashlib.md5(b"replaced").hexdigest()}"')])  # noqa: S324
    assert done.status_code == 200, done.text
    assert _visible(http, name) == b"replaced"


def test_multipart_precondition_is_checked_at_completion(http, prefix) -> None:
    name = f"{prefix}/once"
    upload_id = _initiate(http, name, **{"x-goog-if-generation-match": "0"})
    etag = _part(http, name, upload_id, 1, b"mine")
    assert http.put(_key(name), content=b"theirs").status_code == 200  # a rival wins meanwhile
    refused = _complete(http, name, upload_id, [(1, etag)])
    assert (refused.status_code, _code(refused)) == (412, "PreconditionFailed")
    assert _visible(http, name) == b"theirs"
    # The refused upload can still be aborted; then it is gone.
    assert http.delete(_key(name), params={"uploadId": upload_id}).status_code == 204
    gone = http.put(_key(name), params={"partNumber": "1", "uploadId": upload_id}, content=b"x")
    assert (gone.status_code, _code(gone)) == (404, "NoSuchUpload")
    assert _visible(http, name) == b"theirs"


def test_an_upload_id_serves_only_its_own_object(http, prefix) -> None:
    upload_id = _initiate(http, f"{prefix}/a")
    other = http.put(_key(f"{prefix}/b"), params={"partNumber": "1", "uploadId": upload_id},
                     content=b"x")  # fmt: skip
    assert (other.status_code, _code(other)) == (404, "NoSuchUpload")


def test_list_v2_prefixes_pages_and_start_after(http: httpx.Client, prefix: str) -> None:
    names = [f"{prefix}/d/{i:02d}" for i in range(7)] + [f"{prefix}/e/x", f"{prefix}/f/y"]
    for name in names:
        assert http.put(_key(name), content=b"1").status_code == 200

    def page(**params: str) -> ET.Element:
        answer = http.get("", params={"list-type": "2", **params})
        assert answer.status_code == 200, answer.text
        return _parse(answer.content)

    def keys(root: ET.Element) -> list[str]:
        return [e.text or "" for e in root.iter() if e.tag.endswith("Key")]

    def prefixes(root: ET.Element) -> list[str]:
        return [e.findtext("{*}Prefix") or "" for e in root.iter()
                if e.tag.endswith("CommonPrefixes")]  # fmt: skip

    top = page(prefix=f"{prefix}/", delimiter="/")
    assert keys(top) == []
    assert prefixes(top) == [f"{prefix}/d/", f"{prefix}/e/", f"{prefix}/f/"]
    seen: list[str] = []
    token = None
    for _ in range(10):
        params = {"prefix": f"{prefix}/", "max-keys": "3"}
        if token:
            params["continuation-token"] = token
        root = page(**params)
        seen += keys(root)
        token = root.findtext("{*}NextContinuationToken")
        assert (root.findtext("{*}IsTruncated") == "true") == (token is not None)
        if token is None:
            break
    assert seen == sorted(names)
    after = page(prefix=f"{prefix}/d/", **{"start-after": f"{prefix}/d/03"})
    assert keys(after) == [f"{prefix}/d/{i:02d}" for i in range(4, 7)]
    contents = page(prefix=f"{prefix}/e/").find("{*}Contents")
    assert contents is not None
    assert contents.findtext("{*}Size") == "1"
    assert contents.findtext("{*}LastModified")
    assert (contents.findtext("{*}ETag") or "").startswith('"')


def test_delete_and_missing_objects(http: httpx.Client, prefix: str) -> None:
    name = f"{prefix}/gone"
    assert http.put(_key(name), content=b"x").status_code == 200
    assert http.delete(_key(name)).status_code == 204
    missing = http.delete(_key(name))
    assert (missing.status_code, _code(missing)) == (404, "NoSuchKey")
    assert _visible(http, name) is None
    assert http.head(_key(name)).status_code == 404


def test_conditional_reads(http: httpx.Client, prefix: str) -> None:
    name = f"{prefix}/cond"
    put = http.put(_key(name), content=b"x")
    etag, generation = put.headers["ETag"], put.headers["x-goog-generation"]
    assert http.get(_key(name), headers={"If-Match": etag}).status_code == 200
    assert http.get(_key(name), headers={"If-Match": '"nope"'}).status_code == 412
    assert http.get(_key(name), headers={"If-None-Match": etag}).status_code == 304
    stale = {"x-goog-if-generation-match": str(int(generation) + 1)}
    assert http.get(_key(name), headers=stale).status_code == 412


def test_refusals_have_the_xml_shape(local_gcs: LocalGcs, prefix: str) -> None:
    url = f"{local_gcs.guard}/{local_gcs.bucket}/{quote(prefix + '/a', safe='')}"
    anonymous = httpx.put(url, content=b"x", trust_env=False)
    assert anonymous.status_code == 401
    assert _code(anonymous) == "AuthenticationRequired"
    reader = {"Authorization": f"Bearer {local_gcs.token(prefix, 'read')}"}
    denied = httpx.put(url, content=b"x", headers=reader, trust_env=False)
    assert (denied.status_code, _code(denied)) == (403, "AccessDenied")
    for params in ({"uploads": ""}, {"uploadId": "u", "partNumber": "1"}):
        refused = httpx.request("POST" if "uploads" in params else "PUT", url, params=params,
                                headers=reader, trust_env=False)  # fmt: skip
        assert refused.status_code == 403


def test_lance_concurrent_appends_all_land(local_gcs: LocalGcs, prefix: str) -> None:
    """Lance commits a version by creating its manifest only if absent
    (`x-goog-if-generation-match: 0`): two writers appending at once both land, every row once,
    because the layer makes that precondition atomic with the write."""
    import threading

    import lance
    import pyarrow as pa

    uri = f"gs://{local_gcs.bucket}/{prefix}/ds"
    options = {"google_storage_token": local_gcs.token(prefix), "allow_http": "true",
               "google_base_url": local_gcs.guard}  # fmt: skip
    lance.write_dataset(pa.table({"id": [-1]}), uri, storage_options=options)
    errors: list[BaseException] = []

    def appender(base: int) -> None:
        try:
            for i in range(4):
                rows = pa.table({"id": list(range(base + 10 * i, base + 10 * i + 10))})
                lance.write_dataset(rows, uri, mode="append", storage_options=options)
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=appender, args=(base,)) for base in (0, 1000)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert errors == []
    got = sorted(lance.dataset(uri, storage_options=options).to_table()["id"].to_pylist())
    assert got == [-1, *range(40), *range(1000, 1040)]
    assert lance.dataset(uri, storage_options=options).version == 9


def test_list_v1_pages_with_markers(http: httpx.Client, prefix: str) -> None:
    names = [f"{prefix}/k{i}" for i in range(5)]
    for name in names:
        assert http.put(_key(name), content=b"1").status_code == 200
    seen: list[str] = []
    marker = ""
    for _ in range(10):
        params = {"prefix": f"{prefix}/", "max-keys": "2", **({"marker": marker} if marker else {})}
        root = _parse(http.get("", params=params).content)
        seen += [e.text or "" for e in root.iter() if e.tag.endswith("Key")]
        marker = root.findtext("{*}NextMarker") or ""
        if root.findtext("{*}IsTruncated") != "true":
            break
    assert seen == names
    bad = http.get("", params={"list-type": "2", "prefix": f"{prefix}/",
                               "continuation-token": "%%%"})  # fmt: skip
    assert (bad.status_code, _code(bad)) == (400, "InvalidArgument")


def test_a_name_encoded_twice_is_checked_as_the_store_reads_it(local_gcs: LocalGcs,
                                                               prefix: str) -> None:
    """Regression: the layer decoded the path twice (aiohttp's decoded path, then each part),
    so `<prefix>%252Fx` was checked as `<prefix>/x` while fake-gcs-server stored the object
    `<prefix>%2Fx`, a name outside the token's prefix. Both APIs now check the name the store
    reads."""
    auth = {"Authorization": f"Bearer {local_gcs.token(prefix)}"}
    escaped = quote(quote(f"{prefix}/x", safe=""), safe="")  # %252F: one literal %2F
    xml = httpx.put(f"{local_gcs.guard}/{local_gcs.bucket}/{escaped}", content=b"x",
                    headers=auth, trust_env=False)  # fmt: skip
    assert xml.status_code == 403
    json_api = httpx.delete(f"{local_gcs.guard}/storage/v1/b/{local_gcs.bucket}/o/{escaped}",
                            headers=auth, trust_env=False)  # fmt: skip
    assert json_api.status_code == 403
    listing = httpx.get(f"{local_gcs.server}/storage/v1/b/{local_gcs.bucket}/o",
                        params={"prefix": prefix.split("/")[0]}, trust_env=False).json()
    assert not [i["name"] for i in listing.get("items", []) if "%" in i["name"]]
