"""duckdb/sql.py: scoped secrets and scans built from a vended credential (pure SQL text)."""

from __future__ import annotations

import pytest

from lakegate_client import StorageCredential, TableCredentials, UnsupportedStorageError
from lakegate_client.duckdb.sql import (
    duckdb_location,
    iceberg_attach_sql,
    iceberg_token_secret_sql,
    scan_expression,
    table_secret_sql,
)

LOCATION = "s3://warehouse/lakehouse/t1/"


def creds(**extra: str) -> TableCredentials:
    config = {
        "s3.access-key-id": "AKIA1",
        "s3.secret-access-key": "sec'ret",
        "s3.session-token": "tok",
        "s3.region": "us-east-1",
        "s3.endpoint": "http://127.0.0.1:9000/",
        "s3.path-style-access": "true",
        **extra,
    }
    return TableCredentials.from_parts(
        location=LOCATION,
        credentials=[StorageCredential(LOCATION, config)],
        expires_at_ms=1_900_000_000_000,
    )


def test_s3_secret_is_scoped_to_the_table_and_speaks_duckdb_key_names() -> None:
    sql = table_secret_sql("s1", "delta", creds())
    assert sql.startswith('CREATE OR REPLACE SECRET "s1" (TYPE s3, ')
    assert "KEY_ID 'AKIA1'" in sql
    assert "SECRET 'sec''ret'" in sql  # quotes doubled, never breaking out of the literal
    assert "SESSION_TOKEN 'tok'" in sql
    assert "ENDPOINT '127.0.0.1:9000'" in sql  # DuckDB wants host:port, scheme via USE_SSL
    assert "USE_SSL false" in sql
    assert "URL_STYLE 'path'" in sql
    assert "SCOPE 's3://warehouse/lakehouse/t1'" in sql


def test_https_vhost_store() -> None:
    https = {"s3.endpoint": "https://s3.example", "s3.path-style-access": "false"}
    sql = table_secret_sql("s", "parquet", creds(**https))
    assert "USE_SSL true" in sql
    assert "URL_STYLE 'vhost'" in sql


def test_lance_secret_uses_lances_option_names_without_our_expiry() -> None:
    sql = table_secret_sql("l", "lance", creds())
    assert "(TYPE lance, SCOPE 's3://warehouse/lakehouse/t1', " in sql
    assert "aws_access_key_id 'AKIA1'" in sql
    assert "aws_secret_access_key 'sec''ret'" in sql
    assert "aws_session_token 'tok'" in sql
    assert "expires_at_millis" not in sql
    assert "KEY_ID" not in sql


@pytest.mark.parametrize(
    ("fmt", "expected"),
    [
        ("parquet", "read_parquet('s3://warehouse/lakehouse/t1/**/*.parquet')"),
        ("csv", "read_csv('s3://warehouse/lakehouse/t1/**/*.csv')"),
        ("json", "read_json('s3://warehouse/lakehouse/t1/**/*.json')"),
        ("delta", "delta_scan('s3://warehouse/lakehouse/t1')"),
        ("lance", "__lance_scan('s3://warehouse/lakehouse/t1')"),
    ],
)
def test_scan_expression_per_format(fmt: str, expected: str) -> None:
    assert scan_expression(fmt, LOCATION) == expected


def test_unknown_format_is_a_typed_error() -> None:
    with pytest.raises(UnsupportedStorageError, match="orc"):
        scan_expression("orc", LOCATION)


ADLS_LOCATION = "abfss://c@acct.dfs.core.windows.net/t"


def _adls(endpoint: str | None) -> TableCredentials:
    return TableCredentials.from_parts(
        location=ADLS_LOCATION,
        credentials=[
            StorageCredential(
                ADLS_LOCATION, {"adls.sas-token.acct.dfs.core.windows.net": "sv=1&sig=x"}
            )
        ],
        expires_at_ms=None,
    ).with_storage_endpoint(endpoint)


def test_adls_reads_az_paths_with_a_connection_string_secret(monkeypatch) -> None:
    monkeypatch.delenv("LAKEGATE_ADLS_ENDPOINT", raising=False)
    local = _adls("http://127.0.0.1:10000/devstoreaccount1")
    assert duckdb_location(local) == "az://c/t"
    assert table_secret_sql("a", "parquet", local) == (
        "CREATE OR REPLACE SECRET \"a\" (TYPE azure, CONNECTION_STRING "
        "'BlobEndpoint=http://127.0.0.1:10000/devstoreaccount1;SharedAccessSignature=sv=1&sig=x',"
        " SCOPE 'az://c/t')"
    )
    public = table_secret_sql("a", "parquet", _adls(None))
    assert "BlobEndpoint=https://acct.blob.core.windows.net;" in public
    lance = table_secret_sql("a", "lance", local)
    assert "TYPE lance, SCOPE 'az://c/t'" in lance
    assert "azure_endpoint 'http://127.0.0.1:10000/devstoreaccount1'" in lance


def test_gcs_credentials_are_refused_not_half_converted() -> None:
    gcs = TableCredentials.from_parts(
        location="gs://b/t",
        credentials=[StorageCredential("gs://b/t", {"gcs.oauth2.token": "ya29.x"})],
        expires_at_ms=None,
    )
    with pytest.raises(UnsupportedStorageError, match="HMAC"):
        table_secret_sql("a", "parquet", gcs)


def test_iceberg_attach_and_token_secret() -> None:
    assert iceberg_token_secret_sql("t", "to'k") == (
        "CREATE OR REPLACE SECRET \"t\" (TYPE iceberg, TOKEN 'to''k')"
    )
    assert iceberg_attach_sql("lake", "demo", "http://127.0.0.1:1/catalog", "t") == (
        "ATTACH 'demo' AS \"lake\" (TYPE iceberg, ENDPOINT 'http://127.0.0.1:1/catalog',"
        ' SECRET "t")'
    )
