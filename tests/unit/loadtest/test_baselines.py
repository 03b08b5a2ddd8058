"""The trivial baseline servers' prebuilt answers (loadtest/baselines.py)."""

from __future__ import annotations

import json

from lakegate.v1 import credentials_pb2
from loadtest.baselines import synthetic_aws_body, synthetic_grpc_body, synthetic_http_body


def test_synthetic_answers_carry_a_session_token_sized_like_seaweedfs_sts() -> None:
    doc = json.loads(synthetic_http_body())
    assert len(doc["credentials"][0]["config"]["s3.session-token"]) == 920
    assert set(json.loads(synthetic_aws_body())) == {
        "AccessKeyId",
        "SecretAccessKey",
        "Token",
        "Expiration",
    }


def test_grpc_answer_is_the_same_credential_as_the_json_one() -> None:
    # One instant for both: the expiry fields are computed from it (a ms tick apart would differ).
    now_ms = 1_800_000_000_000
    msg = credentials_pb2.GetTableCredentialsResponse.FromString(synthetic_grpc_body(now_ms))
    doc = json.loads(synthetic_http_body(now_ms))
    assert msg.location == doc["location"]
    assert dict(msg.credentials[0].config) == doc["credentials"][0]["config"]
