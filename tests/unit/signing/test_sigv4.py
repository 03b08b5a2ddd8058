"""Node-local SigV4: botocore's signature, with the signer API's header and payload rules."""

from __future__ import annotations

import datetime
import hashlib

import pytest
from botocore.auth import S3SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

from gateway.errors import InvalidRequestError
from gateway.signing.request import parse_sign_request
from gateway.signing.sigv4 import SigningKeys, sign_headers

AK, SK, TOKEN = "ASIAEXAMPLE", "secret/example+key", "session-token"
WHEN = datetime.datetime(2027, 1, 15, 8, 0, 0)
URI = "http://127.0.0.1:8333/bkt/wh/t1/data/f%20x.parquet"


def _sign(headers: dict[str, list[str]], method: str = "GET", body: str | None = None,
          uri: str = URI) -> dict[str, list[str]]:
    doc = {"region": "us-east-1", "uri": uri, "method": method, "headers": headers}
    if body is not None:
        doc["body"] = body
    return sign_headers(parse_sign_request(doc), AK, SK, TOKEN, WHEN, SigningKeys())


def _signed_names(out: dict[str, list[str]]) -> list[str]:
    return out["authorization"][0].split("SignedHeaders=")[1].split(",")[0].split(";")


def _botocore(headers: dict[str, str], payload: str, method: str = "GET") -> str:
    """botocore's own S3 SigV4 signature of the same request at the same time."""
    req = AWSRequest(method=method, url=URI, headers={**headers, "X-Amz-Content-SHA256": payload,
                                                       "X-Amz-Security-Token": TOKEN})
    req.context["timestamp"] = WHEN.strftime("%Y%m%dT%H%M%SZ")
    req.headers["X-Amz-Date"] = req.context["timestamp"]
    auth = S3SigV4Auth(Credentials(AK, SK, TOKEN), "s3", "us-east-1")
    return str(auth.signature(auth.string_to_sign(req, auth.canonical_request(req)), req))


def test_signature_is_botocores_and_varying_headers_stay_unsigned():
    headers = {"Range": ["bytes=0-99"], "If-None-Match": ["\"e\""], "User-Agent": ["ua"],
               "amz-sdk-invocation-id": ["1"], "amz-sdk-request": ["attempt=1"],
               "x-amz-meta-owner": ["team"]}
    out = _sign(headers)
    assert _signed_names(out) == ["host", "x-amz-content-sha256", "x-amz-date",
                                  "x-amz-meta-owner", "x-amz-security-token"]
    expected = _botocore({"x-amz-meta-owner": "team"}, "UNSIGNED-PAYLOAD")
    assert out["authorization"][0].endswith(f"Signature={expected}")
    for name, values in headers.items():  # every request header echoed unchanged
        assert out[name] == values
    assert out["x-amz-security-token"] == [TOKEN]
    assert out["x-amz-date"] == ["20270115T080000Z"]


def test_the_clients_payload_hash_is_honoured():
    out = _sign({"x-amz-content-sha256": ["STREAMING-UNSIGNED-PAYLOAD-TRAILER"],
                 "x-amz-trailer": ["x-amz-checksum-crc32"]}, "PUT")
    assert out["x-amz-content-sha256"] == ["STREAMING-UNSIGNED-PAYLOAD-TRAILER"]
    expected = _botocore({"x-amz-trailer": "x-amz-checksum-crc32"},
                         "STREAMING-UNSIGNED-PAYLOAD-TRAILER", "PUT")
    assert out["authorization"][0].endswith(f"Signature={expected}")


def test_a_body_is_bound_by_its_hash_and_a_contradicting_hash_is_refused():
    body = "<Delete><Object><Key>wh/t1/a</Key></Object></Delete>"
    out = _sign({}, "POST", body, uri="http://127.0.0.1:8333/bkt?delete")
    assert out["x-amz-content-sha256"] == [hashlib.sha256(body.encode()).hexdigest()]
    with pytest.raises(InvalidRequestError):
        _sign({"x-amz-content-sha256": ["UNSIGNED-PAYLOAD"]}, "POST", body,
              uri="http://127.0.0.1:8333/bkt?delete")
