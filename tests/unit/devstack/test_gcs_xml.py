"""The XML-API translation's pure parts: completion bodies, GCS's part rules, preconditions,
copy sources and the multipart store's bounds (the calls themselves run on the real
fake-gcs-server in tests/integration/devstack/test_gcs_xml_api.py)."""

from __future__ import annotations

import pytest

from devstack.gcs_guard import Access, classify, is_xml_api
from devstack.gcs_xml import (
    MIN_PART_BYTES,
    Conditions,
    MultipartUpload,
    MultipartUploads,
    XmlError,
    assemble,
    copy_source,
    parse_complete,
)


def _upload() -> MultipartUpload:
    return MultipartUpload("wh", "lake/t1/a", {}, Conditions())


def test_parse_complete_reads_object_stores_body() -> None:
    body = (b'<CompleteMultipartUpload><Part><PartNumber>1</PartNumber><ETag>"a"</ETag></Part>'
            b"<Part><PartNumber>2</PartNumber><ETag>b</ETag></Part>"
            b"</CompleteMultipartUpload>")  # fmt: skip
    assert parse_complete(body) == [(1, '"a"'), (2, "b")]


@pytest.mark.parametrize("body", [b"not xml", b"<CompleteMultipartUpload/>",
                                  b"<C><Part><ETag>x</ETag></Part></C>"])  # fmt: skip
def test_parse_complete_refuses_malformed_bodies(body: bytes) -> None:
    with pytest.raises(XmlError) as info:
        parse_complete(body)
    assert (info.value.status, info.value.code) == (400, "MalformedXML")


def test_assemble_joins_the_listed_parts_in_order() -> None:
    uploads = MultipartUploads()
    upload = _upload()
    uploads.start(upload)
    first = uploads.put_part(upload, 1, b"a" * MIN_PART_BYTES)
    unlisted = uploads.put_part(upload, 2, b"unlisted")
    last = uploads.put_part(upload, 3, b"z")
    assert unlisted != last
    assert assemble(upload, [(1, first), (3, last.strip('"'))]) == b"a" * MIN_PART_BYTES + b"z"


@pytest.mark.parametrize(
    ("listed", "code"),
    [([(2, "e2"), (1, "e1")], "InvalidPartOrder"), ([(1, "e1"), (1, "e1")], "InvalidPartOrder"),
     ([(1, "wrong")], "InvalidPart"), ([(9, "e1")], "InvalidPart"),
     ([(1, "e1"), (2, "e2")], "EntityTooSmall")],
)  # fmt: skip
def test_assemble_applies_gcs_part_rules(listed: list[tuple[int, str]], code: str) -> None:
    uploads = MultipartUploads()
    upload = _upload()
    etags = {"e1": uploads.put_part(upload, 1, b"small"), "e2": uploads.put_part(upload, 2, b"x")}
    with pytest.raises(XmlError) as info:
        assemble(upload, [(n, etags.get(e, e)) for n, e in listed])
    assert (info.value.status, info.value.code) == (400, code)


def test_conditions_from_headers() -> None:
    assert Conditions.from_headers({"x-goog-if-generation-match": "0"}).query() == {
        "ifGenerationMatch": "0"
    }
    assert Conditions.from_headers({"x-goog-if-generation-not-match": "7"}).query() == {
        "ifGenerationNotMatch": "7"
    }
    assert Conditions.from_headers({}).query() == {}
    with pytest.raises(XmlError) as info:
        Conditions.from_headers({"x-goog-if-generation-match": "x"})
    assert info.value.status == 400
    for header in ("if-none-match", "if-match", "x-goog-if-metageneration-match",
                   "x-goog-copy-source-if-generation-match"):  # fmt: skip
        with pytest.raises(XmlError) as info:
            Conditions.from_headers({header: "1"})
        assert info.value.status == 501


def test_an_upload_is_bound_to_its_object_and_bounded() -> None:
    uploads = MultipartUploads(max_uploads=2, max_bytes=10)
    first = uploads.start(_upload())
    with pytest.raises(XmlError) as info:
        uploads.get(first, "wh", "lake/t1/other")
    assert info.value.code == "NoSuchUpload"
    upload = uploads.get(first, "wh", "lake/t1/a")
    uploads.put_part(upload, 1, b"12345678")
    uploads.put_part(upload, 1, b"1234567890")  # a replaced part counts once
    with pytest.raises(XmlError) as info:
        uploads.put_part(upload, 2, b"1")
    assert info.value.status == 503
    uploads.start(_upload())
    uploads.start(_upload())
    assert len(uploads) == 2
    with pytest.raises(XmlError):
        uploads.get(first, "wh", "lake/t1/a")  # the oldest is forgotten


def test_copy_source_and_its_classification() -> None:
    assert copy_source("wh/lake%2Ft1%2Fa") == ("wh", "lake/t1/a")
    assert copy_source("/wh/lake/t1/a") == ("wh", "lake/t1/a")
    with pytest.raises(XmlError):
        copy_source("wh")
    access = classify("PUT", "/wh/lake%2Ft1%2Fb", {}, b"", "", "wh/lake%2Ft2%2Fa")
    assert access == Access("wh", ("lake/t2/a", "lake/t1/b"), writes=True)


def test_xml_api_paths() -> None:
    assert is_xml_api("/wh/lake/t1/a")
    assert is_xml_api("/wh")
    for path in ("/storage/v1/b/wh/o", "/upload/storage/v1/b/wh/o", "/download/storage/v1/b/x"):
        assert not is_xml_api(path)
