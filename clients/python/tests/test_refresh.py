"""lakegate_client.refresh: the container endpoint for each SDK and botocore credentials that re-ask
the gateway before they expire."""

from __future__ import annotations

import os
import stat
import time
from pathlib import Path

import pytest

from lakegate_client import ClientConfig, ConfigurationError, StorageCredential, TableCredentials
from lakegate_client.refresh import (
    MANDATORY_REFRESH_S,
    boto3_session,
    botocore_credentials,
    container_credentials,
)

LOCATION = "s3://warehouse/lakehouse/wh/tbl"
ENDPOINT = "http://127.0.0.1:9000"
CALLER_TOKEN = "caller-secret-token"  # noqa: S105 - a test value
TOKEN_VAR = "AWS_CONTAINER_AUTHORIZATION_TOKEN"  # noqa: S105 - a variable name
MARKER = "lakegate"  # the default Authorization marker (caller mode none)
TOKEN_FILE = "/run/token"  # noqa: S105 - a path


def _config(url: str, **env: str) -> ClientConfig:
    return ClientConfig.resolve(url, environ={"LAKEGATE_WAREHOUSE": "demo", **env})


def test_container_uri_names_warehouse_namespace_table_and_access() -> None:
    cc = container_credentials(
        "demo ns", "orders/1", access="write", config=_config("http://127.0.0.1:8765")
    )
    assert cc.uri == "http://127.0.0.1:8765/v1/aws-credentials/demo/demo%20ns/orders%2F1?access=write"
    assert cc.env() == {
        "AWS_CONTAINER_CREDENTIALS_FULL_URI": cc.uri,
        TOKEN_VAR: MARKER,
    }


def test_container_token_is_the_caller_token_and_never_in_repr() -> None:
    cfg = _config("http://127.0.0.1:8765", LAKEGATE_TOKEN=CALLER_TOKEN)
    cc = container_credentials("ns", "t", config=cfg)
    assert cc.env()[TOKEN_VAR] == CALLER_TOKEN
    assert CALLER_TOKEN not in repr(cc)


@pytest.mark.parametrize("url", ["unix:/tmp/lg.sock", "grpc://127.0.0.1:8766"])
def test_container_endpoint_needs_http_over_tcp(url: str) -> None:
    with pytest.raises(ConfigurationError, match="HTTP TCP"):
        container_credentials("ns", "t", config=_config(url))


def test_container_endpoint_needs_a_warehouse() -> None:
    cfg = ClientConfig.resolve("http://127.0.0.1:8765", environ={})
    with pytest.raises(ConfigurationError, match="warehouse"):
        container_credentials("ns", "t", config=cfg)


def test_object_store_options_carry_the_endpoint_and_no_static_key() -> None:
    cc = container_credentials("ns", "t", endpoint=ENDPOINT, region="eu-west-1",
                               config=_config("http://127.0.0.1:8765"))
    lance = cc.lance_storage_options(TOKEN_FILE)
    delta = cc.delta_storage_options(TOKEN_FILE)
    for options in (lance, delta):
        assert options["aws_container_credentials_full_uri"] == cc.uri
        assert options["aws_container_authorization_token_file"] == TOKEN_FILE
        assert not any("secret" in k.lower() or "access_key" in k.lower() for k in options)
    assert (lance["aws_endpoint"], lance["allow_http"], lance["aws_region"]) == (
        ENDPOINT, "true", "eu-west-1")
    assert (delta["AWS_ENDPOINT_URL"], delta["AWS_ALLOW_HTTP"]) == (ENDPOINT, "true")


def test_token_file_is_private_and_holds_the_token(tmp_path: Path) -> None:
    cfg = _config("http://127.0.0.1:8765", LAKEGATE_TOKEN=CALLER_TOKEN)
    path = container_credentials("ns", "t", config=cfg).token_file(str(tmp_path))
    assert Path(path).read_text(encoding="utf-8") == CALLER_TOKEN
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600


def test_environment_is_set_inside_the_block_and_restored_after(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(TOKEN_VAR, "before")
    monkeypatch.delenv("AWS_CONTAINER_CREDENTIALS_FULL_URI", raising=False)
    cc = container_credentials("ns", "t", config=_config("http://127.0.0.1:8765"))
    with cc.environment():
        assert os.environ["AWS_CONTAINER_CREDENTIALS_FULL_URI"] == cc.uri
        assert os.environ[TOKEN_VAR] == MARKER
    assert "AWS_CONTAINER_CREDENTIALS_FULL_URI" not in os.environ
    assert os.environ[TOKEN_VAR] == "before"


def test_pyarrow_filesystem_uses_the_endpoint_and_leaves_the_environment_alone() -> None:
    cc = container_credentials("ns", "t", endpoint=ENDPOINT, region="eu-west-1",
                               config=_config("http://127.0.0.1:8765"))
    fs = cc.pyarrow_filesystem()
    assert fs.region == "eu-west-1"
    assert "AWS_CONTAINER_CREDENTIALS_FULL_URI" not in os.environ


class _Gateway:
    """Stands in for a Client: each call vends the next key, expiring ``left_s`` from now."""

    def __init__(self, left_s: float) -> None:
        self.calls: list[tuple[str, str, str]] = []
        self.expected: list[str | None] = []
        self.left_s = left_s

    def credentials(self, namespace: str, table: str, *, warehouse: str | None = None,
                    access: str = "read",
                    expected_location: str | None = None) -> TableCredentials:
        self.calls.append((namespace, table, access))
        self.expected.append(expected_location)
        n = len(self.calls)
        config = {"s3.access-key-id": f"ASIA{n}", "s3.secret-access-key": f"secret-{n}",
                  "s3.session-token": f"token-{n}", "s3.region": "eu-west-1"}
        expiry = int((time.time() + self.left_s) * 1000)
        return TableCredentials.from_parts(
            location=LOCATION, credentials=[StorageCredential(LOCATION, config)],
            expires_at_ms=expiry,
        )


def test_botocore_credentials_keep_a_fresh_key_without_asking_again() -> None:
    gateway = _Gateway(left_s=900)
    creds = botocore_credentials(gateway, "ns", "t", access="write")  # type: ignore[arg-type]
    frozen = creds.get_frozen_credentials()
    assert (frozen.access_key, frozen.secret_key, frozen.token) == ("ASIA1", "secret-1", "token-1")
    assert gateway.calls == [("ns", "t", "write")]


def test_botocore_refreshes_ask_for_the_expected_table_every_time() -> None:
    gateway = _Gateway(left_s=MANDATORY_REFRESH_S / 2)
    creds = botocore_credentials(gateway, "ns", "t",  # type: ignore[arg-type]
                                 expected_location=LOCATION)
    gateway.left_s = 900
    creds.get_frozen_credentials()
    assert gateway.expected == [LOCATION, LOCATION]


def test_botocore_credentials_re_ask_the_gateway_when_close_to_expiry() -> None:
    gateway = _Gateway(left_s=MANDATORY_REFRESH_S / 2)  # already inside the mandatory window
    creds = botocore_credentials(gateway, "ns", "t")  # type: ignore[arg-type]
    gateway.left_s = 900
    assert creds.get_frozen_credentials().access_key == "ASIA2"
    assert len(gateway.calls) == 2


def test_boto3_session_signs_with_the_gateways_key() -> None:
    session = boto3_session(_Gateway(left_s=900), "ns", "t", region="eu-west-1")  # type: ignore[arg-type]
    assert session.region_name == "eu-west-1"
    assert session.get_credentials().get_frozen_credentials().access_key == "ASIA1"


def test_s3fs_filesystem_signs_with_the_gateways_key_and_refreshes_near_expiry() -> None:
    import asyncio

    from lakegate_client.refresh import s3fs_filesystem

    gateway = _Gateway(left_s=MANDATORY_REFRESH_S / 2)
    fs = s3fs_filesystem(gateway, "ns", "t", access="write",  # type: ignore[arg-type]
                         endpoint=ENDPOINT, region="eu-west-1")
    gateway.left_s = 900

    async def frozen_key() -> str:
        creds = await fs.session.get_credentials()
        return str((await creds.get_frozen_credentials()).access_key)

    assert asyncio.run(frozen_key()) == "ASIA2"  # the first key was inside the mandatory window
    assert gateway.calls == [("ns", "t", "write"), ("ns", "t", "write")]
