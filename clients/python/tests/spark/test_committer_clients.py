"""The driver's and tasks' S3 clients: one per process and credential (issue 36)."""

from __future__ import annotations

from typing import Any

from botocore.config import Config

from lakegate_client.spark import committer


class _Creds:
    def __init__(self, key: str, *, path_style: bool = True) -> None:
        self.key, self.path_style = key, path_style

    def boto3_kwargs(self) -> dict[str, Any]:
        return {"aws_access_key_id": self.key, "aws_secret_access_key": f"secret-{self.key}",
                "aws_session_token": None, "region_name": "us-east-1",
                "endpoint_url": "http://127.0.0.1:1",
                "config": Config(s3={"addressing_style": "path" if self.path_style else "auto"})}


def test_a_credential_gets_one_client_per_process_and_other_keys_get_their_own() -> None:
    """Building a boto3 client costs 0.3-0.5 s of CPU on a busy node: each task and each step
    of a commit built one. The same keys now share a client; new keys never reuse it."""
    first = committer.s3_client(_Creds("AKIA1"))
    assert committer.s3_client(_Creds("AKIA1")) is first
    other = committer.s3_client(_Creds("AKIA2"))
    assert other is not first
    signs_with = other._request_signer._credentials  # the keys it signs with
    assert signs_with.access_key == "AKIA2"
    assert signs_with.secret_key == "secret-AKIA2"  # noqa: S105 - a test key
    assert committer.s3_client(_Creds("AKIA1", path_style=False)) is not first
    assert first.meta.config.s3 == {"addressing_style": "path"}
    assert first.meta.endpoint_url == "http://127.0.0.1:1"
