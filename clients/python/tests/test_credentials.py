"""TableCredentials: merging, expiry, redaction, and the exact option names of every adapter."""

from __future__ import annotations

from datetime import UTC, datetime

import pyarrow.fs as pafs
import pytest

from lakegate_client import (
    ConfigurationError,
    StorageCredential,
    TableCredentials,
    UnsupportedStorageError,
)
from lakegate_client.credentials import expiry_from_config, redact

EXPIRES_MS = 1_800_000_000_000
LOCATION = "s3://warehouse/lakehouse/wh/tbl"
S3_HTTP = {
    "s3.access-key-id": "AKIATEST",
    "s3.secret-access-key": "secret-value",
    "s3.session-token": "session-token-value",
    "s3.endpoint": "http://127.0.0.1:9000/",
    "s3.region": "eu-west-1",
    "s3.path-style-access": "true",
    "s3.session-token-expires-at-ms": str(EXPIRES_MS),
}


def creds(config: dict[str, str], location: str = LOCATION) -> TableCredentials:
    return TableCredentials.from_parts(
        location=location, credentials=[StorageCredential(prefix=location, config=config)]
    )


def test_longest_covering_prefix_wins_over_broader_and_unrelated_ones() -> None:
    merged = TableCredentials.from_parts(
        location=LOCATION,
        credentials=[
            StorageCredential("s3://warehouse/", {"s3.region": "broad", "only-broad": "1"}),
            StorageCredential(LOCATION + "/", {"s3.region": "exact"}),
            StorageCredential("s3://warehouse/lakehouse/wh/tb", {"s3.region": "not-a-parent"}),
        ],
        base_config={"s3.region": "base", "base-only": "1"},
    )
    assert merged.config == {"s3.region": "exact", "base-only": "1"}


def test_s3a_prefix_covers_an_s3_location() -> None:
    merged = TableCredentials.from_parts(
        location=LOCATION, credentials=[StorageCredential("s3a://warehouse/lakehouse", {"k": "v"})]
    )
    assert merged.config == {"k": "v"}


def test_without_a_covering_prefix_credentials_apply_in_order() -> None:
    merged = TableCredentials.from_parts(
        location=LOCATION,
        credentials=[
            StorageCredential("gs://a", {"k": "1"}),
            StorageCredential("gs://b", {"k": "2"}),
        ],
    )
    assert merged.config == {"k": "2"}


def test_expiry_prefers_the_gateway_value_then_the_credential_then_config_keys() -> None:
    a = TableCredentials.from_parts(
        location=LOCATION,
        credentials=[StorageCredential(LOCATION, S3_HTTP, expires_at_ms=EXPIRES_MS + 5)],
        expires_at_ms=EXPIRES_MS + 9,
    )
    b = TableCredentials.from_parts(
        location=LOCATION, credentials=[StorageCredential(LOCATION, S3_HTTP, EXPIRES_MS + 5)]
    )
    c = creds(S3_HTTP)
    assert (a.expires_at_ms, b.expires_at_ms, c.expires_at_ms) == (
        EXPIRES_MS + 9,
        EXPIRES_MS + 5,
        EXPIRES_MS,
    )
    assert c.expires_at == datetime.fromtimestamp(EXPIRES_MS / 1000, tz=UTC)


def test_expiry_reads_every_vended_expiry_key_and_takes_the_earliest() -> None:
    config = {
        "expiration-time": "300",
        "gcs.oauth2.token-expires-at": "200",
        "adls.sas-token-expires-at-ms.acct.dfs.core.windows.net": "100",
        "s3.session-token-expires-at-ms": "not-a-number",
    }
    assert expiry_from_config(config) == 100
    assert expiry_from_config({"s3.region": "x"}) is None


def test_remaining_is_measured_against_the_given_time_and_none_without_expiry() -> None:
    c = creds(S3_HTTP)
    assert c.remaining_at(EXPIRES_MS / 1000 - 60) == pytest.approx(60)
    assert creds({"s3.access-key-id": "a"}).remaining_at(0) is None
    assert creds({"s3.access-key-id": "a"}).remaining_s is None


def test_repr_and_str_redact_every_secret_but_keep_useful_fields() -> None:
    c = creds(
        {
            **S3_HTTP,
            "adls.sas-token.acct.dfs.core.windows.net": "sas-secret",
            "gcs.oauth2.token": "gcs-secret",
        }
    )
    for text in (repr(c), str(c), repr(c.storage_credentials), repr(c.s3())):
        for secret in (
            "AKIATEST",
            "secret-value",
            "session-token-value",
            "sas-secret",
            "gcs-secret",
        ):
            assert secret not in text
    assert "http://127.0.0.1:9000/" in repr(c)
    assert str(EXPIRES_MS) in repr(c)  # expiry keys are not secret


def test_redact_keeps_non_secret_keys() -> None:
    assert redact({"s3.region": "r", "s3.secret-access-key": "s"}) == {
        "s3.region": "r",
        "s3.secret-access-key": "***",
    }


# -- S3 adapters ---------------------------------------------------------------------------------


def test_lance_options_for_an_http_endpoint() -> None:
    assert creds(S3_HTTP).lance_storage_options() == {
        "aws_access_key_id": "AKIATEST",
        "aws_secret_access_key": "secret-value",
        "aws_session_token": "session-token-value",
        "aws_region": "eu-west-1",
        "aws_endpoint": "http://127.0.0.1:9000",
        "allow_http": "true",
        "aws_virtual_hosted_style_request": "false",
        "expires_at_millis": str(EXPIRES_MS),
    }


def test_delta_options_for_an_http_endpoint() -> None:
    assert creds(S3_HTTP).delta_storage_options() == {
        "AWS_ACCESS_KEY_ID": "AKIATEST",
        "AWS_SECRET_ACCESS_KEY": "secret-value",
        "AWS_SESSION_TOKEN": "session-token-value",
        "AWS_REGION": "eu-west-1",
        "AWS_ENDPOINT_URL": "http://127.0.0.1:9000",
        "AWS_ALLOW_HTTP": "true",
        "AWS_VIRTUAL_HOSTED_STYLE_REQUEST": "false",
        "AWS_EC2_METADATA_DISABLED": "true",
    }


def test_fsspec_kwargs_for_an_http_endpoint() -> None:
    assert creds(S3_HTTP).fsspec_kwargs() == {
        "key": "AKIATEST",
        "secret": "secret-value",
        "token": "session-token-value",
        "endpoint_url": "http://127.0.0.1:9000",
        "client_kwargs": {"region_name": "eu-west-1"},
        "config_kwargs": {"s3": {"addressing_style": "path"}},
    }


def test_boto3_kwargs_carry_credentials_endpoint_and_path_style() -> None:
    kwargs = creds(S3_HTTP).boto3_kwargs()
    config = kwargs.pop("config")
    assert kwargs == {
        "aws_access_key_id": "AKIATEST",
        "aws_secret_access_key": "secret-value",
        "aws_session_token": "session-token-value",
        "region_name": "eu-west-1",
        "endpoint_url": "http://127.0.0.1:9000",
    }
    assert config.s3 == {"addressing_style": "path"}


def test_pyarrow_kwargs_split_scheme_from_endpoint() -> None:
    assert creds(S3_HTTP).s3().pyarrow_kwargs() == {
        "access_key": "AKIATEST",
        "secret_key": "secret-value",
        "session_token": "session-token-value",
        "region": "eu-west-1",
        "endpoint_override": "127.0.0.1:9000",
        "scheme": "http",
    }
    fs = creds(S3_HTTP).pyarrow_filesystem()
    assert isinstance(fs, pafs.S3FileSystem)
    assert fs.region == "eu-west-1"


def test_s3_filesystem_on_a_pyarrow_without_azure(monkeypatch: pytest.MonkeyPatch) -> None:
    """pyarrow 15 (the [arrow] floor; Spark 3.5 images) has no AzureFileSystem: S3 must work."""
    monkeypatch.delattr(pafs, "AzureFileSystem")
    assert isinstance(creds(S3_HTTP).pyarrow_filesystem(), pafs.S3FileSystem)


def test_hadoop_s3a_conf_global_per_bucket_and_spark_prefixed() -> None:
    c = creds(S3_HTTP)
    assert c.hadoop_s3a_conf() == {
        "fs.s3a.access.key": "AKIATEST",
        "fs.s3a.secret.key": "secret-value",
        "fs.s3a.session.token": "session-token-value",
        "fs.s3a.aws.credentials.provider": (
            "org.apache.hadoop.fs.s3a.TemporaryAWSCredentialsProvider"
        ),
        "fs.s3a.endpoint": "http://127.0.0.1:9000",
        "fs.s3a.endpoint.region": "eu-west-1",
        "fs.s3a.connection.ssl.enabled": "false",
        "fs.s3a.path.style.access": "true",
        "fs.s3a.impl": "org.apache.hadoop.fs.s3a.S3AFileSystem",
    }
    per_bucket = c.hadoop_s3a_conf(per_bucket=True)
    assert per_bucket["fs.s3a.bucket.warehouse.access.key"] == "AKIATEST"
    assert all(k.startswith("fs.s3a.bucket.warehouse.") for k in per_bucket)
    assert all(k.startswith("spark.hadoop.fs.s3a.") for k in c.hadoop_s3a_conf(spark=True))


def test_env_for_an_http_endpoint() -> None:
    assert creds(S3_HTTP).env() == {
        "AWS_ACCESS_KEY_ID": "AKIATEST",
        "AWS_SECRET_ACCESS_KEY": "secret-value",
        "AWS_SESSION_TOKEN": "session-token-value",
        "AWS_REGION": "eu-west-1",
        "AWS_DEFAULT_REGION": "eu-west-1",
        "AWS_ENDPOINT_URL": "http://127.0.0.1:9000",
        "AWS_ENDPOINT_URL_S3": "http://127.0.0.1:9000",
        "AWS_ALLOW_HTTP": "true",
        "AWS_CREDENTIAL_EXPIRATION": "2027-01-15T08:00:00Z",
    }


def test_aws_without_endpoint_defaults_region_and_uses_virtual_hosts() -> None:
    c = creds({"client.access-key-id": "AK", "client.secret-access-key": "SK"})
    assert c.lance_storage_options() == {
        "aws_access_key_id": "AK",
        "aws_secret_access_key": "SK",
        "aws_region": "us-east-1",
        "aws_virtual_hosted_style_request": "true",
    }
    assert "AWS_ALLOW_HTTP" not in c.delta_storage_options()
    assert "config_kwargs" not in c.fsspec_kwargs()
    assert c.s3().pyarrow_kwargs()["force_virtual_addressing"] is True
    assert c.hadoop_s3a_conf()["fs.s3a.path.style.access"] == "false"


def test_https_endpoint_without_path_style_key_uses_path_style_and_no_http_switch() -> None:
    c = creds(
        {
            "s3.access-key-id": "AK",
            "s3.secret-access-key": "SK",
            "s3.endpoint": "https://minio.internal:9000",
            "region": "ap-south-1",
        }
    )
    options = c.lance_storage_options()
    assert "allow_http" not in options
    assert options["aws_virtual_hosted_style_request"] == "false"
    assert options["aws_region"] == "ap-south-1"
    assert c.s3().pyarrow_kwargs()["scheme"] == "https"
    assert c.hadoop_s3a_conf()["fs.s3a.connection.ssl.enabled"] == "true"


def test_explicit_path_style_false_is_honoured_with_an_endpoint() -> None:
    c = creds({**S3_HTTP, "s3.path-style-access": "false"})
    assert c.lance_storage_options()["aws_virtual_hosted_style_request"] == "true"


def test_s3a_location_is_normalised_for_arrow_engines() -> None:
    c = creds(S3_HTTP, location="s3a://warehouse/t")
    assert (c.storage, c.uri, c.bucket) == ("s3", "s3://warehouse/t", "warehouse")


def test_s3_adapters_refuse_a_credential_without_keys() -> None:
    c = creds({"s3.region": "us-east-1", "s3.remote-signing-enabled": "true"})
    with pytest.raises(UnsupportedStorageError, match="no S3 access key"):
        c.lance_storage_options()


# -- ADLS and GCS --------------------------------------------------------------------------------

ADLS_LOCATION = "abfss://container@acct.dfs.core.windows.net/wh/tbl"
ADLS = {
    "adls.sas-token.other.dfs.core.windows.net": "sv=other",
    "adls.sas-token.acct.dfs.core.windows.net": "sv=2024&sig=abc",
    "adls.sas-token-expires-at-ms.acct.dfs.core.windows.net": str(EXPIRES_MS),
    "expiration-time": str(EXPIRES_MS),
}


def test_adls_shapes_pick_the_locations_account() -> None:
    c = creds(ADLS, location=ADLS_LOCATION)
    assert c.storage == "adls"
    assert c.lance_storage_options() == {
        "azure_storage_account_name": "acct",
        "azure_storage_sas_token": "sv=2024&sig=abc",
        "expires_at_millis": str(EXPIRES_MS),
    }
    assert c.delta_storage_options() == {
        "AZURE_STORAGE_ACCOUNT_NAME": "acct",
        "AZURE_STORAGE_SAS_TOKEN": "sv=2024&sig=abc",
    }
    assert c.with_storage_endpoint(None).fsspec_kwargs() == {
        "account_name": "acct", "sas_token": "sv=2024&sig=abc"
    }
    assert c.env() == c.delta_storage_options()
    assert c.hadoop_s3a_conf() == {
        "fs.azure.account.auth.type.acct.dfs.core.windows.net": "SAS",
        "fs.azure.sas.token.provider.type.acct.dfs.core.windows.net": (
            "org.apache.hadoop.fs.azurebfs.sas.FixedSASTokenProvider"
        ),
        "fs.azure.sas.fixed.token.acct.dfs.core.windows.net": "sv=2024&sig=abc",
    }
    fs = c.pyarrow_filesystem()  # an AzureFileSystem whose errors carry no SAS
    assert isinstance(fs, pafs.PyFileSystem)
    assert fs.type_name == "py::redacted-abfs"
    with pytest.raises(UnsupportedStorageError, match="boto3"):
        c.boto3_kwargs()


def test_adls_pyarrow_sas_token_starts_with_a_question_mark() -> None:
    """Arrow appends ``sas_token`` to the URL as is: without ``?`` every request names another
    resource (Azure 400 OutOfRangeInput). Lakekeeper vends it without one."""
    c = creds(ADLS, location=ADLS_LOCATION)
    assert c._adls().pyarrow_kwargs() == {
        "account_name": "acct",
        "sas_token": "?sv=2024&sig=abc",
    }
    # A token vended with its `?` already is not doubled.
    doubled = creds({**ADLS, "adls.sas-token.acct.dfs.core.windows.net": "?sv=1"}, ADLS_LOCATION)
    assert doubled._adls().pyarrow_kwargs()["sas_token"] == "?sv=1"  # noqa: S105
    assert doubled.lance_storage_options()["azure_storage_sas_token"] == "sv=1"  # noqa: S105


AZURITE = "http://127.0.0.1:10000/devstoreaccount1"


def test_adls_endpoint_override_reaches_a_local_blob_endpoint_in_every_adapter(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("LAKEGATE_ADLS_ENDPOINT", raising=False)
    c = creds(ADLS, location=ADLS_LOCATION).with_storage_endpoint(AZURITE + "/")
    assert c.lance_storage_options() == {
        "azure_storage_account_name": "acct",
        "azure_storage_sas_token": "sv=2024&sig=abc",
        "azure_endpoint": AZURITE,
        "allow_http": "true",
        "expires_at_millis": str(EXPIRES_MS),
    }
    assert c.delta_storage_options() == {
        "AZURE_STORAGE_ACCOUNT_NAME": "acct",
        "AZURE_STORAGE_SAS_TOKEN": "sv=2024&sig=abc",
        "azure_storage_endpoint": AZURITE,
        "allow_http": "true",
    }
    assert c.fsspec_kwargs() == {
        "account_name": "acct",
        "connection_string": f"BlobEndpoint={AZURITE};SharedAccessSignature=sv=2024&sig=abc",
    }
    assert c._adls().pyarrow_kwargs() == {
        "account_name": "acct",
        "sas_token": "?sv=2024&sig=abc",
        "blob_storage_authority": "127.0.0.1:10000",
        "blob_storage_scheme": "http",
        "dfs_storage_authority": "127.0.0.1:10000",
        "dfs_storage_scheme": "http",
    }


def test_adls_endpoint_override_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LAKEGATE_ADLS_ENDPOINT", AZURITE)
    c = creds(ADLS, location=ADLS_LOCATION)
    assert c.lance_storage_options()["azure_endpoint"] == AZURITE
    assert c.with_storage_endpoint(None).lance_storage_options()["azure_endpoint"] == AZURITE
    # An explicit override wins over the environment.
    assert c.with_storage_endpoint("http://h:1/a").lance_storage_options()["azure_endpoint"] == (
        "http://h:1/a"
    )
    monkeypatch.setenv("LAKEGATE_ADLS_ENDPOINT", "not a url")
    with pytest.raises(ConfigurationError, match="LAKEGATE_ADLS_ENDPOINT"):
        c.lance_storage_options()


GCS = {
    "gcs.oauth2.token": "ya29.token",
    "gcs.project-id": "proj",
    "gcs.oauth2.token-expires-at": str(EXPIRES_MS),
}


def test_gcs_shapes_where_the_library_takes_a_raw_token() -> None:
    c = creds(GCS, location="gs://bucket/wh/tbl")
    assert c.storage == "gcs"
    assert c.lance_storage_options() == {
        "google_storage_token": "ya29.token",
        "expires_at_millis": str(EXPIRES_MS),
    }
    kwargs = c.fsspec_kwargs()
    assert kwargs["project"] == "proj"
    assert kwargs["token"].token == "ya29.token"  # noqa: S105
    pa_kwargs = c._gcs().pyarrow_kwargs()
    assert pa_kwargs["access_token"] == "ya29.token"  # noqa: S105
    assert pa_kwargs["credential_token_expiration"] == datetime.fromtimestamp(
        EXPIRES_MS / 1000, tz=UTC
    )
    assert isinstance(c.pyarrow_filesystem(), pafs.GcsFileSystem)


def test_lance_on_a_local_gcs_endpoint_gets_the_token_and_the_base_url() -> None:
    """Lakekeeper vends no GCS endpoint: the client's setting becomes object_store's base URL
    (plain HTTP allowed only for an http:// endpoint), next to the vended token."""
    c = creds(GCS, location="gs://bucket/wh/tbl").with_storage_endpoint("http://127.0.0.1:4443/")
    assert c.lance_storage_options() == {
        "google_storage_token": "ya29.token",
        "google_base_url": "http://127.0.0.1:4443",
        "allow_http": "true",
        "expires_at_millis": str(EXPIRES_MS),
    }
    tls = creds(GCS, location="gs://bucket/wh/tbl").with_storage_endpoint("https://gcs.example")
    assert "allow_http" not in tls.lance_storage_options()


def test_gcsfs_takes_a_credentials_object_and_never_asks_tokeninfo(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Given a raw string, gcsfs asked Google's tokeninfo for the expiry and refused a token
    with <= 300 s left (and could not work off Google at all): the adapter passes a
    ``google.oauth2`` credentials object, which gcsfs uses as is, to its last second."""
    import gcsfs
    import gcsfs.credentials
    from google.oauth2.credentials import Credentials

    asked: list[object] = []

    class _TokenInfo:
        status_code = 200

        @staticmethod
        def raise_for_status() -> None:
            return None

        @staticmethod
        def json() -> dict[str, str]:
            return {"exp": str(datetime.now(tz=UTC).timestamp() + 100)}  # 100 s left

    def _get(*args: object, **kwargs: object) -> _TokenInfo:
        asked.append(args)
        return _TokenInfo()

    monkeypatch.setattr(gcsfs.credentials.requests, "get", _get)
    expires = str(int((datetime.now(tz=UTC).timestamp() + 100) * 1000))
    c = creds({**GCS, "gcs.oauth2.token-expires-at": expires}, location="gs://bucket/wh/tbl")
    kwargs = c.fsspec_kwargs()
    fs = gcsfs.GCSFileSystem(**kwargs, skip_instance_cache=True)
    assert isinstance(kwargs["token"], Credentials)
    fs.credentials.maybe_refresh()  # no refresh attempt: the token has no expiry to gcsfs
    assert asked == []
    assert fs.credentials.heads == {"authorization": "Bearer ya29.token"}


@pytest.mark.parametrize(
    "adapter", ["delta_storage_options", "boto3_kwargs", "hadoop_s3a_conf", "env"]
)
def test_gcs_refuses_engines_without_a_raw_token_option(adapter: str) -> None:
    c = creds(GCS, location="gs://bucket/wh/tbl")
    with pytest.raises(UnsupportedStorageError):
        getattr(c, adapter)()


def test_deltalake_on_gcs_is_refused_with_the_libraries_reason() -> None:
    """deltalake's bundled object_store (0.13) has no GCS bearer-token option: the error says
    so, rather than a bare "unsupported" (or options that fall back to ambient credentials)."""
    c = creds(GCS, location="gs://bucket/wh/tbl")
    with pytest.raises(UnsupportedStorageError) as info:
        c.delta_storage_options()
    message = str(info.value)
    assert "object_store 0.13" in message
    assert "google_bearer_token" in message
    assert "ya29" not in message  # never the token


def test_unknown_storage_is_refused_by_every_adapter() -> None:
    c = creds({"foo": "bar"}, location="file:///tmp/t")
    assert c.storage == "unknown"
    for adapter in (
        "lance_storage_options",
        "delta_storage_options",
        "fsspec_kwargs",
        "boto3_kwargs",
        "pyarrow_filesystem",
        "hadoop_s3a_conf",
        "env",
    ):
        with pytest.raises(UnsupportedStorageError):
            getattr(c, adapter)()


def test_gcs_settings_are_public_on_gcs_only() -> None:
    gcs = creds(GCS, location="gs://bucket/wh/tbl").with_storage_endpoint("http://127.0.0.1:1/")
    settings = gcs.gcs()
    assert (settings.token, settings.project_id, settings.endpoint) == (
        "ya29.token", "proj", "http://127.0.0.1:1")
    assert "ya29" not in repr(settings)
    with pytest.raises(UnsupportedStorageError):
        creds(S3_HTTP).gcs()
