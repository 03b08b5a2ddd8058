"""lakegate_client.spark.hadoop: the Hadoop options a native read or write of a table needs."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import pytest

from lakegate_client import UnsupportedStorageError
from lakegate_client._config import ClientConfig
from lakegate_client.credentials import TableCredentials
from lakegate_client.spark.hadoop import (
    GCS_PROVIDER,
    S3_PROVIDER,
    SAS_PROVIDER,
    hadoop_options,
    hadoop_path,
    hadoop_table,
)

S3_CONFIG = {
    "s3.access-key-id": "AKIA-SECRET-ID",
    "s3.secret-access-key": "SECRET-KEY",
    "s3.session-token": "SECRET-TOKEN",
    "s3.endpoint": "http://127.0.0.1:9000/",
    "s3.region": "eu-west-1",
    "s3.path-style-access": "true",
}


@dataclass
class FakeClient:
    """What the helper uses of a Client: its config and one credentials call (recorded)."""

    url: str
    location: str
    config_keys: dict[str, str] = field(default_factory=dict)
    calls: list[tuple[Any, ...]] = field(default_factory=list)

    @property
    def config(self) -> ClientConfig:
        return ClientConfig.resolve(self.url, warehouse="demo", environ={})

    def credentials(self, namespace: Any, table: str, warehouse: str | None = None,
                    access: str = "read") -> TableCredentials:
        self.calls.append((namespace, table, warehouse, access))
        return TableCredentials(location=self.location, config=self.config_keys,
                                expires_at=datetime(2030, 1, 1, tzinfo=UTC))


def test_s3_options_name_the_table_and_the_store_but_hold_no_secret() -> None:
    client = FakeClient("http://127.0.0.1:8765", "s3://bucket/wh/t1", S3_CONFIG)
    table = hadoop_table(client, ("a", "b"), "t1", "write")  # type: ignore[arg-type]
    assert table.path == "s3a://bucket/wh/t1"
    opts = table.options
    assert opts["fs.s3a.aws.credentials.provider"] == S3_PROVIDER
    assert opts["fs.lakegate.url"] == "http://127.0.0.1:8765"
    assert opts["fs.lakegate.warehouse"] == "demo"
    assert opts["fs.lakegate.namespace"] == "a\x1fb"
    assert opts["fs.lakegate.table"] == "t1"
    assert opts["fs.lakegate.access"] == "write"
    assert opts["fs.s3a.endpoint"] == "http://127.0.0.1:9000"
    assert opts["fs.s3a.connection.ssl.enabled"] == "false"
    assert opts["fs.s3a.endpoint.region"] == "eu-west-1"
    assert opts["fs.s3a.path.style.access"] == "true"
    assert opts["fs.s3a.impl.disable.cache"] == "true"
    assert not any("SECRET" in v for v in opts.values())
    assert client.calls == [(("a", "b"), "t1", None, "write")]


def test_a_token_is_passed_only_when_given() -> None:
    client = FakeClient("http://127.0.0.1:8765", "s3://bucket/wh/t1", S3_CONFIG)
    assert "fs.lakegate.token" not in hadoop_options(client, "ns", "t1")  # type: ignore[arg-type]
    opts = hadoop_options(client, "ns", "t1", token_file="/var/run/token")  # type: ignore[arg-type]  # noqa: S106
    assert opts["fs.lakegate.token.file"] == "/var/run/token"


def test_gcs_and_adls_get_their_providers() -> None:
    gcs = FakeClient("http://127.0.0.1:8765", "gs://bucket/wh/t1", {"gcs.oauth2.token": "x"})
    opts = hadoop_options(gcs, "ns", "t1")  # type: ignore[arg-type]
    assert opts["fs.gs.auth.access.token.provider"] == GCS_PROVIDER
    assert opts["fs.gs.auth.type"] == "ACCESS_TOKEN_PROVIDER"
    adls = FakeClient("http://127.0.0.1:8765", "abfss://c@acct.dfs.core.windows.net/wh/t1")
    assert hadoop_options(adls, "ns", "t1")["fs.azure.sas.token.provider.type"] == SAS_PROVIDER  # type: ignore[arg-type]


def test_a_client_on_a_unix_socket_or_grpc_is_refused_with_the_reason() -> None:
    for url in ("unix:/tmp/lakegate.sock", "grpc://127.0.0.1:8766"):
        client = FakeClient(url, "s3://bucket/wh/t1", S3_CONFIG)
        with pytest.raises(UnsupportedStorageError, match="loopback HTTP"):
            hadoop_options(client, "ns", "t1")  # type: ignore[arg-type]
        assert client.calls == []


def test_hadoop_path_maps_only_s3() -> None:
    assert hadoop_path("s3://b/p") == "s3a://b/p"
    assert hadoop_path("gs://b/p") == "gs://b/p"
    assert hadoop_path("abfss://c@a.dfs.core.windows.net/p") == "abfss://c@a.dfs.core.windows.net/p"
