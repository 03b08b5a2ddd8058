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
import hmac
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


class SigningKeys:
    """The SigV4 signing key per (secret, day, region): four HMACs saved per signature (a
    node signs with few credentials, each all day). Bounded; holds secrets, so no repr."""

    MAX = 256

    def __init__(self) -> None:
        self._keys: dict[tuple[str, str, str], bytes] = {}

    def __repr__(self) -> str:
        return f"SigningKeys({len(self._keys)} keys)"

    def get(self, secret: str, day: str, region: str) -> bytes:
        key = (secret, day, region)
        found = self._keys.get(key)
        if found is None:
            if len(self._keys) >= self.MAX:
                self._keys.clear()
            k = hmac.new(f"AWS4{secret}".encode(), day.encode(), hashlib.sha256).digest()
            for part in (region, "s3", "aws4_request"):
                k = hmac.new(k, part.encode(), hashlib.sha256).digest()
            found = self._keys[key] = k
        return found


class _Auth(S3SigV4Auth):
    """S3SigV4Auth with a fixed payload hash, the unsigned-header rule, a given time and a
    cached signing key; the headers to sign are selected once per request (botocore asks
    twice)."""

    def __init__(self, credentials: Credentials, region: str, payload_hash: str,
                 when: datetime.datetime, keys: SigningKeys) -> None:
        super().__init__(credentials, "s3", region)
        self._payload_hash = payload_hash
        self._when = when
        self._keys = keys
        self._secret = credentials.secret_key or ""
        self._region = region
        self._selected: Any = None

    def payload(self, request: Any) -> str:
        return self._payload_hash

    def headers_to_sign(self, request: Any) -> Any:
        if self._selected is None:
            headers = super().headers_to_sign(request)
            for name in [n for n in headers.keys() if not signed(n)]:
                del headers[name]
            self._selected = headers
        return self._selected

    def signature(self, string_to_sign: str, request: Any) -> str:
        key = self._keys.get(self._secret, request.context["timestamp"][0:8], self._region)
        return hmac.new(key, string_to_sign.encode(), hashlib.sha256).hexdigest()

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
                 when: datetime.datetime, keys: SigningKeys) -> dict[str, list[str]]:
    """The answer's `headers`: the request's, unchanged, plus the SigV4 headers.

    `when` is naive UTC (botocore's convention); `keys` is the caller's signing-key cache.
    """
    aws = AWSRequest(method=req.method, url=req.uri,
                     headers={k: ", ".join(v) for k, v in req.headers})
    _Auth(Credentials(access_key, secret_key, token), req.region, payload_hash(req),
          when, keys).add_auth(aws)
    added = {name.lower() for name in _ADDED}
    out = {k: list(v) for k, v in req.headers if k.lower() not in added}
    for name in _ADDED:
        if name in aws.headers:
            out[name.lower()] = [str(aws.headers[name])]
    return out
