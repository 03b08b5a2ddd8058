"""S3: Iceberg-style vended keys → the option names each engine wants.

Key names are each library's own (checked against each library's source and a real S3
server). Three things every shape must get right for a non-AWS endpoint:

* the plain-HTTP switch (Lance ``allow_http``, deltalake ``AWS_ALLOW_HTTP``, pyarrow
  ``scheme="http"``, s3fs/boto3 by the URL scheme, S3A ``connection.ssl.enabled=false``);
* the region, always explicit (otherwise pyarrow tries to resolve the bucket region from AWS);
* path-style addressing: ``s3.path-style-access`` when the catalog sends it; when it does not
  and a custom endpoint is set, path style (S3-compatible servers rarely resolve virtual hosts).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlsplit

from lakegate_client._errors import UnsupportedStorageError

__all__ = ["S3Settings"]

DEFAULT_REGION = "us-east-1"
_S3A_PROVIDER = "org.apache.hadoop.fs.s3a.TemporaryAWSCredentialsProvider"


def _first(config: Mapping[str, str], *keys: str) -> str | None:
    # pyiceberg's get_first_property_value: s3.* wins over client.* wins over bare keys.
    for key in keys:
        value = config.get(key)
        if value:
            return value
    return None


def _truthy(value: str | None) -> bool | None:
    if value is None:
        return None
    return value.strip().lower() in ("true", "1", "yes")


@dataclass(frozen=True, repr=False)
class S3Settings:
    """The S3 facts of one vended credential, normalised once.

    ``repr`` is deliberately uninformative: the object holds secrets.
    """

    access_key_id: str = field(repr=False)
    secret_access_key: str = field(repr=False)
    session_token: str | None = field(repr=False)
    region: str
    endpoint: str | None
    path_style: bool
    expires_at_ms: int | None

    def __repr__(self) -> str:
        return f"S3Settings(region={self.region!r}, endpoint={self.endpoint!r}, <redacted>)"

    @classmethod
    def from_config(cls, config: Mapping[str, str], expires_at_ms: int | None) -> S3Settings:
        """Read the vended keys (``s3.*`` first, then ``client.*``).

        Raises:
            UnsupportedStorageError: the credential carries no S3 access key (for example a
                remote-signing-only answer).
        """
        key = _first(config, "s3.access-key-id", "client.access-key-id")
        secret = _first(config, "s3.secret-access-key", "client.secret-access-key")
        if not key or not secret:
            raise UnsupportedStorageError(
                "the credential has no S3 access key (remote signing only, or not vended)",
                type="NoVendedCredential",
            )
        endpoint = _first(config, "s3.endpoint")
        # Lakekeeper serialises the endpoint from a parsed URL, so it ends with "/".
        endpoint = endpoint.rstrip("/") if endpoint else None
        path_style = _truthy(config.get("s3.path-style-access"))
        if path_style is None:
            path_style = endpoint is not None
        return cls(
            access_key_id=key,
            secret_access_key=secret,
            session_token=_first(config, "s3.session-token", "client.session-token"),
            region=_first(config, "s3.region", "client.region", "region") or DEFAULT_REGION,
            endpoint=endpoint,
            path_style=path_style,
            expires_at_ms=expires_at_ms,
        )

    @property
    def is_http(self) -> bool:
        """True when the endpoint is plain HTTP (every library needs telling)."""
        return self.endpoint is not None and self.endpoint.lower().startswith("http://")

    def lance(self) -> dict[str, str]:
        """Lance / object_store ``storage_options``."""
        options = {
            "aws_access_key_id": self.access_key_id,
            "aws_secret_access_key": self.secret_access_key,
            "aws_region": self.region,
            "aws_virtual_hosted_style_request": "false" if self.path_style else "true",
        }
        if self.session_token:
            options["aws_session_token"] = self.session_token
        if self.endpoint:
            options["aws_endpoint"] = self.endpoint
        if self.is_http:
            options["allow_http"] = "true"
        if self.expires_at_ms:
            options["expires_at_millis"] = str(self.expires_at_ms)
        return options

    def delta(self) -> dict[str, str]:
        """deltalake (delta-rs) ``storage_options``."""
        options = {
            "AWS_ACCESS_KEY_ID": self.access_key_id,
            "AWS_SECRET_ACCESS_KEY": self.secret_access_key,
            "AWS_REGION": self.region,
            "AWS_VIRTUAL_HOSTED_STYLE_REQUEST": "false" if self.path_style else "true",
            # Static credentials: never let delta-rs wander off to the instance metadata service.
            "AWS_EC2_METADATA_DISABLED": "true",
        }
        if self.session_token:
            options["AWS_SESSION_TOKEN"] = self.session_token
        if self.endpoint:
            options["AWS_ENDPOINT_URL"] = self.endpoint
        if self.is_http:
            options["AWS_ALLOW_HTTP"] = "true"
        return options

    def fsspec(self) -> dict[str, Any]:
        """s3fs keyword arguments (also ``fsspec.open(url, **kwargs)`` / pandas storage_options)."""
        kwargs: dict[str, Any] = {
            "key": self.access_key_id,
            "secret": self.secret_access_key,
            "client_kwargs": {"region_name": self.region},
        }
        if self.session_token:
            kwargs["token"] = self.session_token
        if self.endpoint:
            kwargs["endpoint_url"] = self.endpoint
        if self.path_style:
            kwargs["config_kwargs"] = {"s3": {"addressing_style": "path"}}
        return kwargs

    def boto3(self) -> dict[str, Any]:
        """``boto3.client("s3", **kwargs)`` / ``boto3.resource`` keyword arguments."""
        # lazy: boto3 is an optional extra
        from botocore.config import Config

        kwargs: dict[str, Any] = {
            "aws_access_key_id": self.access_key_id,
            "aws_secret_access_key": self.secret_access_key,
            "aws_session_token": self.session_token,
            "region_name": self.region,
            "config": Config(s3={"addressing_style": "path" if self.path_style else "auto"}),
        }
        if self.endpoint:
            kwargs["endpoint_url"] = self.endpoint
        return kwargs

    def pyarrow_kwargs(self) -> dict[str, Any]:
        """``pyarrow.fs.S3FileSystem`` keyword arguments."""
        kwargs: dict[str, Any] = {
            "access_key": self.access_key_id,
            "secret_key": self.secret_access_key,
            "session_token": self.session_token,
            "region": self.region,
        }
        if self.endpoint:
            parts = urlsplit(self.endpoint)
            kwargs["endpoint_override"] = parts.netloc + parts.path
            kwargs["scheme"] = parts.scheme or "https"
        if not self.path_style:
            kwargs["force_virtual_addressing"] = True
        return kwargs

    def hadoop_s3a(self, bucket: str | None) -> dict[str, str]:
        """Hadoop S3A keys (global, or per-bucket when ``bucket`` is given)."""
        base = f"fs.s3a.bucket.{bucket}." if bucket else "fs.s3a."
        conf = {
            f"{base}access.key": self.access_key_id,
            f"{base}secret.key": self.secret_access_key,
            f"{base}aws.credentials.provider": _S3A_PROVIDER,
            f"{base}endpoint.region": self.region,
            f"{base}path.style.access": "true" if self.path_style else "false",
        }
        if self.session_token:
            conf[f"{base}session.token"] = self.session_token
        if self.endpoint:
            conf[f"{base}endpoint"] = self.endpoint
            conf[f"{base}connection.ssl.enabled"] = "false" if self.is_http else "true"
        if bucket is None:
            conf["fs.s3a.impl"] = "org.apache.hadoop.fs.s3a.S3AFileSystem"
        return conf

    def env(self) -> dict[str, str]:
        """Environment variables read by the AWS SDKs (and object_store for the http switch)."""
        env = {
            "AWS_ACCESS_KEY_ID": self.access_key_id,
            "AWS_SECRET_ACCESS_KEY": self.secret_access_key,
            "AWS_REGION": self.region,
            "AWS_DEFAULT_REGION": self.region,
        }
        if self.session_token:
            env["AWS_SESSION_TOKEN"] = self.session_token
        if self.endpoint:
            env["AWS_ENDPOINT_URL"] = self.endpoint
            env["AWS_ENDPOINT_URL_S3"] = self.endpoint
        if self.is_http:
            env["AWS_ALLOW_HTTP"] = "true"
        if self.expires_at_ms:
            expires = datetime.fromtimestamp(self.expires_at_ms / 1000, tz=UTC)
            env["AWS_CREDENTIAL_EXPIRATION"] = expires.strftime("%Y-%m-%dT%H:%M:%SZ")
        return env
