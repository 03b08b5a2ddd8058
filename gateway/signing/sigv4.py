"""Node-local SigV4: botocore's S3 signer with the signer API's header and payload rules.

- Headers that vary per request or that HTTP stacks rewrite are not signed: `range`, `if-*`,
  `amz-sdk-*`, `user-agent`, `expect`, `transfer-encoding`, `connection`, `x-amzn-trace-id`,
  `referer` (case-insensitive). Iceberg Java caches GET/HEAD signatures by URI and restores its
  own values of these, so a signed one would break it; every `x-amz-*` the client sends is
  signed (S3 refuses unsigned ones).
- The payload hash: the client's own `x-amz-content-sha256` when it sent one (AWS SDK v2 sends
  `STREAMING-UNSIGNED-PAYLOAD-TRAILER`), the body's SHA-256 when a body was given (DeleteObjects:
  the checked keys are bound), else `UNSIGNED-PAYLOAD`.
- The time is given (the caller picks the clock), so a signature is a pure function of its
  inputs; the answer echoes every request header unchanged and adds `authorization`,
  `x-amz-date`, `x-amz-content-sha256` and `x-amz-security-token`.
"""

from __future__ import annotations

import datetime
import hashlib
from typing import Any

from botocore.auth import SIGV4_TIMESTAMP, UNSIGNED_PAYLOAD, S3SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

from gateway.errors import InvalidRequestError
from gateway.signing.request import SignRequest

UNSIGNED_HEADERS = frozenset({"range", "user-agent", "expect", "transfer-encoding", "connection",
                              "x-amzn-trace-id", "referer", "content-length"})
UNSIGNED_PREFIXES = ("if-", "amz-sdk-")
_ADDED = ("Authorization", "X-Amz-Date", "X-Amz-Content-SHA256", "X-Amz-Security-Token")


def signed(name: str) -> bool:
    lname = name.lower()
    return lname not in UNSIGNED_HEADERS and not lname.startswith(UNSIGNED_PREFIXES)


class _Auth(S3SigV4Auth):
    """S3SigV4Auth with a fixed payload hash, the unsigned-header rule and a given time."""

    def __init__(self, credentials: Credentials, region: str, payload_hash: str,
                 when: datetime.datetime) -> None:
        super().__init__(credentials, "s3", region)
        self._payload_hash = payload_hash
        self._when = when

    def payload(self, request: Any) -> str:
        return self._payload_hash

    def headers_to_sign(self, request: Any) -> Any:
        headers = super().headers_to_sign(request)
        for name in [n for n in headers.keys() if not signed(n)]:
            del headers[name]
        return headers

    def add_auth(self, request: Any) -> None:
        request.context["timestamp"] = self._when.strftime(SIGV4_TIMESTAMP)
        # botocore's own steps (its add_auth reads the wall clock itself); not in its stubs.
        self._modify_request_before_signing(request)  # type: ignore[attr-defined]
        canonical = self.canonical_request(request)
        self._inject_signature_to_request(  # type: ignore[attr-defined]
            request, self.signature(self.string_to_sign(request, canonical), request))


def payload_hash(req: SignRequest) -> str:
    """The `x-amz-content-sha256` to sign with.

    Raises:
        InvalidRequestError: the client's hash disagrees with the body it sent.
    """
    given = req.header("x-amz-content-sha256")
    if req.body is not None:
        digest = hashlib.sha256(req.body.encode()).hexdigest()
        if given is not None and given != digest:
            raise InvalidRequestError("x-amz-content-sha256 is not the body's SHA-256")
        return digest
    return given or UNSIGNED_PAYLOAD


def sign_headers(req: SignRequest, access_key: str, secret_key: str, token: str | None,
                 when: datetime.datetime) -> dict[str, list[str]]:
    """The answer's `headers`: the request's, unchanged, plus the SigV4 headers.

    `when` is naive UTC (botocore's convention).
    """
    aws = AWSRequest(method=req.method, url=req.uri,
                     headers={k: ", ".join(v) for k, v in req.headers})
    _Auth(Credentials(access_key, secret_key, token), req.region, payload_hash(req),
          when).add_auth(aws)
    added = {name.lower() for name in _ADDED}
    out = {k: list(v) for k, v in req.headers if k.lower() not in added}
    for name in _ADDED:
        if name in aws.headers:
            out[name.lower()] = [str(aws.headers[name])]
    return out
