"""GCS JSON-API batch requests (`POST /batch/storage/v1`, `multipart/mixed`): split and assembled.

The GCS connector sends a rename's copies and deletes as one batch: each part is an
`application/http` request (`DELETE /storage/v1/b/<bucket>/o/<name> HTTP/1.1`, its own headers,
its own body; the request target may be a full URL). devstack/gcs_guard.py splits a batch with
`parse_batch`, checks every part as it checks a single request, forwards each part on its own,
and answers with `batch_response` in Google's response shape (one `application/http` part per
request, `Content-ID: <response-ID>`, in request order).
"""

from __future__ import annotations

from dataclasses import dataclass
from http import HTTPStatus
from urllib.parse import parse_qsl, urlsplit

MAX_PARTS = 100  # Google's limit for one batch


class BatchError(Exception):
    """A batch body this layer cannot read (refused whole, never passed unchecked)."""


@dataclass(frozen=True)
class BatchPart:
    """One request inside a batch. `raw_path` is still percent-encoded (with its query)."""

    content_id: str | None
    method: str
    raw_path: str
    query: dict[str, str]
    headers: dict[str, str]
    body: bytes


@dataclass(frozen=True)
class PartAnswer:
    content_id: str | None
    status: int
    headers: dict[str, str]
    body: bytes


def _boundary(content_type: str) -> str:
    marker = "boundary="
    if not content_type.lower().startswith("multipart/mixed") or marker not in content_type:
        raise BatchError("a batch must be multipart/mixed with a boundary")
    boundary = content_type.split(marker, 1)[1].split(";", 1)[0].strip().strip('"')
    if not boundary:
        raise BatchError("empty batch boundary")
    return boundary


def _head_and_body(block: bytes) -> tuple[list[str], bytes]:
    """Header lines and payload of a MIME part or HTTP message (CRLF or LF line ends)."""
    for sep in (b"\r\n\r\n", b"\n\n"):
        head, found, rest = block.partition(sep)
        if found:
            break
    else:
        head, rest = block, b""
    try:
        lines = [line.rstrip("\r") for line in head.decode("utf-8").split("\n")]
    except UnicodeDecodeError as exc:
        raise BatchError("batch headers are not UTF-8") from exc
    return lines, rest


def _headers(lines: list[str]) -> dict[str, str]:
    headers: dict[str, str] = {}
    for line in lines:
        if not line.strip():
            continue
        name, colon, value = line.partition(":")
        if not colon:
            raise BatchError("a malformed header line in a batch")
        headers[name.strip()] = value.strip()
    return headers


def _part(block: bytes) -> BatchPart:
    outer_lines, inner = _head_and_body(block.lstrip(b"\r\n"))
    outer = {k.lower(): v for k, v in _headers(outer_lines).items()}
    if outer.get("content-type", "").split(";", 1)[0].strip().lower() != "application/http":
        raise BatchError("a batch part must be application/http")
    lines, body = _head_and_body(inner.lstrip(b"\r\n"))
    request_line = lines[0].split(" ") if lines else []
    if len(request_line) != 3 or not request_line[2].startswith("HTTP/"):
        raise BatchError("a batch part without a request line")
    method, target = request_line[0].upper(), request_line[1]
    split = urlsplit(target)
    if not split.path.startswith("/"):
        raise BatchError("a batch part's target is not a path")
    raw_path = split.path + (f"?{split.query}" if split.query else "")
    headers = _headers(lines[1:])
    if body.endswith(b"\r\n"):
        body = body[:-2]
    elif body.endswith(b"\n"):
        body = body[:-1]
    return BatchPart(
        content_id=outer.get("content-id"), method=method, raw_path=raw_path,
        query=dict(parse_qsl(split.query, keep_blank_values=True)), headers=headers, body=body,
    )  # fmt: skip


def parse_batch(body: bytes, content_type: str) -> list[BatchPart]:
    """The requests of a batch, in order.

    Raises:
        BatchError: not a batch this layer can read, or more than MAX_PARTS parts.
    """
    delimiter = b"--" + _boundary(content_type).encode()
    chunks = body.split(delimiter)
    if len(chunks) < 3 or not chunks[-1].lstrip(b" \t").startswith(b"--"):
        raise BatchError("a batch without parts or without its closing boundary")
    parts = [_part(chunk) for chunk in chunks[1:-1]]
    if len(parts) > MAX_PARTS:
        raise BatchError(f"a batch holds at most {MAX_PARTS} requests")
    return parts


def _response_id(content_id: str | None) -> str | None:
    if content_id is None:
        return None
    inner = content_id.strip().strip("<>")
    return f"<response-{inner}>"


def batch_response(answers: list[PartAnswer], boundary: str) -> bytes:
    """A `multipart/mixed` batch answer (Content-Type `multipart/mixed; boundary=<boundary>`)."""
    out = bytearray()
    for answer in answers:
        out += f"--{boundary}\r\nContent-Type: application/http\r\n".encode()
        response_id = _response_id(answer.content_id)
        if response_id is not None:
            out += f"Content-ID: {response_id}\r\n".encode()
        try:
            reason = HTTPStatus(answer.status).phrase
        except ValueError:
            reason = "Status"
        out += f"\r\nHTTP/1.1 {answer.status} {reason}\r\n".encode()
        headers = {k: v for k, v in answer.headers.items() if k.lower() != "content-length"}
        for name, value in headers.items():
            out += f"{name}: {value}\r\n".encode()
        out += f"Content-Length: {len(answer.body)}\r\n\r\n".encode()
        out += answer.body + b"\r\n"
    out += f"--{boundary}--\r\n".encode()
    return bytes(out)
