"""Tests for lakegate_client/redacted_fs.py: no pyarrow error on ADLS carries the SAS."""

from __future__ import annotations

import traceback
from datetime import UTC, datetime, timedelta

import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq
import pytest

from lakegate_client.credentials import StorageCredential, TableCredentials
from lakegate_client.redacted_fs import redact_message, redacted_filesystem

SIG = "c2VjcmV0LXNpZ25hdHVyZS12YWx1ZQ%3D%3D"
SAS = f"sv=2024-05-04&sr=c&sp=rl&se=2099-01-01T00%3A00%3A00Z&sig={SIG}"
LOCATION = "abfss://container@devstoreaccount1.dfs.core.windows.net/wh/tbl"
UNREACHABLE = "http://127.0.0.1:1"  # nothing listens on port 1: every call fails at once


def adls_creds() -> TableCredentials:
    expires = str(int((datetime.now(UTC) + timedelta(hours=1)).timestamp() * 1000))
    config = {
        "adls.sas-token.devstoreaccount1.dfs.core.windows.net": SAS,
        "adls.sas-token-expires-at-ms.devstoreaccount1.dfs.core.windows.net": expires,
        "expiration-time": expires,
    }
    return TableCredentials.from_parts(
        location=LOCATION, credentials=[StorageCredential(prefix=LOCATION, config=config)]
    ).with_storage_endpoint(f"{UNREACHABLE}/devstoreaccount1")


def whole_text(exc: BaseException) -> str:
    return "".join(traceback.format_exception(exc))


@pytest.mark.parametrize("call", [
    lambda fs: fs.get_file_info("container/wh/tbl/x.parquet"),
    lambda fs: fs.get_file_info(pafs.FileSelector("container/wh/tbl", recursive=True)),
    lambda fs: fs.open_input_file("container/wh/tbl/x.parquet"),
    lambda fs: fs.delete_file("container/wh/tbl/x.parquet"),
    lambda fs: pq.read_table("container/wh/tbl", filesystem=fs),
], ids=["info", "listing", "open", "delete", "parquet-read"])
def test_an_azure_error_through_the_credentials_filesystem_carries_no_sas(call) -> None:
    """pyarrow's AzureFileSystem quotes the request URL, SAS included, in its errors (it did on
    the old code: 'GetProperties failed for '...?sig=...''): the client's filesystem raises the
    same error without it, and without the original chained."""
    fs = adls_creds().pyarrow_filesystem()
    with pytest.raises((OSError, pa.ArrowException)) as caught:
        call(fs)
    text = whole_text(caught.value)
    assert "127.0.0.1:1" in text  # still says where it failed
    assert SIG not in text
    assert "sig=" not in text
    assert caught.value.__cause__ is None


def test_the_wrapped_filesystem_reads_and_writes_as_the_inner_one(tmp_path) -> None:
    fs = redacted_filesystem(pafs.LocalFileSystem(), ["s3cr3t"])
    table = pa.table({"a": list(range(500)), "b": ["x"] * 500})
    pq.write_table(table, f"{tmp_path}/part-0.parquet", filesystem=fs)
    assert pq.read_table(str(tmp_path), filesystem=fs).equals(table)
    with fs.open_input_stream(f"{tmp_path}/part-0.parquet") as stream:
        assert stream.read()[:4] == b"PAR1"
    with pytest.raises(FileNotFoundError) as caught:  # the exception type is kept
        fs.open_input_file(f"{tmp_path}/missing-s3cr3t")
    assert "s3cr3t" not in str(caught.value)


def test_redact_message_removes_secrets_and_every_url_query() -> None:
    message = f"failed for 'https://a.blob.core.windows.net/c/x?sig={SIG}&sv=1' (token {SIG})"
    clean = redact_message(message, [SIG])
    assert SIG not in clean
    assert "sv=1" not in clean
    assert "https://a.blob.core.windows.net/c/x?<redacted>" in clean
