"""The raw HTTP/1.1 response parser of the load generator (loadtest/rawhttp.py)."""

from __future__ import annotations

import pytest

from loadtest.rawhttp import RawHttpError, ResponseParser, build_request


def test_request_is_keep_alive_with_headers() -> None:
    raw = build_request("GET", "/v1/x?a=1", {"X-Lakegate-Request": "1"})
    assert raw.startswith(b"GET /v1/x?a=1 HTTP/1.1\r\n")
    assert b"Connection: keep-alive\r\n" in raw
    assert raw.endswith(b"X-Lakegate-Request: 1\r\n\r\n")


def test_responses_split_across_reads_are_reassembled() -> None:
    wire = (
        b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello"
        b"HTTP/1.1 404 Not Found\r\ncontent-length: 2\r\n\r\n{}"
    )
    parser = ResponseParser()
    got = []
    for i in range(0, len(wire), 7):
        got += parser.feed(wire[i : i + 7])
    assert got == [(200, b"hello"), (404, b"{}")]


def test_empty_body_without_content_length_completes() -> None:
    assert ResponseParser().feed(b"HTTP/1.1 204 No Content\r\n\r\n") == [(204, b"")]


@pytest.mark.parametrize(
    "head", [b"SPDY/3 200 OK\r\n\r\n", b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"]
)
def test_unsupported_framing_is_an_error(head: bytes) -> None:
    with pytest.raises(RawHttpError):
        ResponseParser().feed(head)
