"""The driver's and tasks' S3 clients: one per process and credential (issue 36)."""

from __future__ import annotations

from typing import Any

import pytest
from botocore.config import Config

from lakegate_client.engine.stores import s3 as s3_store


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
    first = s3_store.s3_client(_Creds("AKIA1"))
    assert s3_store.s3_client(_Creds("AKIA1")) is first
    other = s3_store.s3_client(_Creds("AKIA2"))
    assert other is not first
    signs_with = other._request_signer._credentials  # the keys it signs with
    assert signs_with.access_key == "AKIA2"
    assert signs_with.secret_key == "secret-AKIA2"  # noqa: S105 - a test key
    assert s3_store.s3_client(_Creds("AKIA1", path_style=False)) is not first
    assert first.meta.config.s3 == {"addressing_style": "path"}
    assert first.meta.endpoint_url == "http://127.0.0.1:1"


def test_clients_of_different_credentials_share_one_service_model(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A client on a boto3 session of its own loaded the S3 model again (0.2 s of CPU and some
    35,000 objects each). A worker that had written a few tables held a model per table, and
    PySpark's ``gc.collect()`` after every task walked them all: at 200 partitions that was
    most of a task's time. A new credential's client now loads nothing from disk."""
    from botocore.loaders import JSONFileLoader

    s3_store.s3_client(_Creds("AKIA-MODEL-1"))  # the process's session has the model now
    loads: list[str] = []
    real = JSONFileLoader.load_file
    monkeypatch.setattr(JSONFileLoader, "load_file",
                        lambda self, path: loads.append(path) or real(self, path))
    second = s3_store.s3_client(_Creds("AKIA-MODEL-2"))
    assert loads == []
    assert second._request_signer._credentials.access_key == "AKIA-MODEL-2"
