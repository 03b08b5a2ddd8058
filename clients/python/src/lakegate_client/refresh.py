"""Credentials that refresh themselves mid-operation, through each library's own mechanism.

Why: a static key pair handed to pyarrow, deltalake, Lance or boto3 dies with ``ExpiredToken`` when
one long write or read outlives it (a multipart upload that keeps adding parts, a long scan).
Every library below already knows how to re-fetch credentials; these adapters point that
mechanism at the node's gateway, which serves a fresh credential before the old one expires:

* :class:`ContainerCredentials` - the AWS container-credentials endpoint of the gateway
  (``/v1/aws-credentials/{wh}/{ns}/{table}``). pyarrow's AWS SDK reads it from
  ``AWS_CONTAINER_CREDENTIALS_FULL_URI``; deltalake and Lance (``object_store``) take it as the
  storage options ``aws_container_credentials_full_uri`` plus a token file. Each SDK caches the
  answer and fetches again before ``Expiration``.
* :func:`botocore_credentials` / :func:`boto3_session` - botocore ``RefreshableCredentials`` whose
  refresh asks the gateway through a :class:`~lakegate_client.Client` (boto3);
  :func:`s3fs_filesystem` - the same on aiobotocore's ``AioRefreshableCredentials`` (s3fs).

The container endpoint needs the gateway's loopback TCP address (an SDK cannot speak to a Unix
socket): ``LAKEGATE_URL=http://127.0.0.1:PORT``.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Literal
from urllib.parse import quote, urlsplit

from lakegate_client._config import ClientConfig
from lakegate_client._errors import ConfigurationError

if TYPE_CHECKING:
    import boto3
    import pyarrow.fs
    from botocore.credentials import RefreshableCredentials

    from lakegate_client._client import Client

__all__ = [
    "ContainerCredentials",
    "boto3_session",
    "botocore_credentials",
    "container_credentials",
    "s3fs_filesystem",
]

Access = Literal["read", "write"]
# Sent as the container endpoint's Authorization header: the gateway's anti-SSRF marker in
# caller mode ``none`` (any value), the caller token otherwise.
_MARKER = "lakegate"
# botocore's defaults (15 / 10 min) exceed a 900 s STS credential: it would refresh on every call.
ADVISORY_REFRESH_S = 240
MANDATORY_REFRESH_S = 120
_ENV_URI = "AWS_CONTAINER_CREDENTIALS_FULL_URI"
_ENV_TOKEN = "AWS_CONTAINER_AUTHORIZATION_TOKEN"  # noqa: S105 - a variable name


@dataclass(frozen=True, repr=False)
class ContainerCredentials:
    """The gateway's AWS container-credentials endpoint for one table and access mode.

    ``token`` is the Authorization value the SDKs send (secret when callers are authenticated).
    """

    uri: str
    token: str = field(repr=False)
    region: str = "us-east-1"
    endpoint: str | None = None  # S3 endpoint (non-AWS stores), e.g. http://127.0.0.1:9000

    def __repr__(self) -> str:
        return f"ContainerCredentials(uri={self.uri!r}, endpoint={self.endpoint!r}, <redacted>)"

    def env(self) -> dict[str, str]:
        """The variables every AWS SDK's default chain reads (pyarrow, boto3, the AWS CLI)."""
        return {_ENV_URI: self.uri, _ENV_TOKEN: self.token}

    def token_file(self, directory: str | None = None) -> str:
        """Write the token to a private file (object_store reads the token from a file)."""
        handle, path = tempfile.mkstemp(prefix="lakegate-token-", dir=directory)
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            out.write(self.token)
        return path

    def _store_options(self, token_file: str) -> dict[str, str]:
        return {
            "aws_container_credentials_full_uri": self.uri,
            "aws_container_authorization_token_file": token_file,
        }

    def lance_storage_options(self, token_file: str) -> dict[str, str]:
        """Lance ``storage_options`` without static keys: object_store refreshes from the URI."""
        options = self._store_options(token_file)
        options["aws_region"] = self.region
        if self.endpoint:
            options["aws_endpoint"] = self.endpoint
            options["aws_virtual_hosted_style_request"] = "false"
            if self.endpoint.startswith("http://"):
                options["allow_http"] = "true"
        return options

    def delta_storage_options(self, token_file: str) -> dict[str, str]:
        """deltalake ``storage_options`` without static keys (same object_store provider)."""
        options = self._store_options(token_file)
        options["AWS_REGION"] = self.region
        options["AWS_EC2_METADATA_DISABLED"] = "true"
        if self.endpoint:
            options["AWS_ENDPOINT_URL"] = self.endpoint
            options["AWS_VIRTUAL_HOSTED_STYLE_REQUEST"] = "false"
            if self.endpoint.startswith("http://"):
                options["AWS_ALLOW_HTTP"] = "true"
        return options

    def pyarrow_filesystem(self) -> pyarrow.fs.S3FileSystem:
        """An ``S3FileSystem`` on the SDK's default chain, which reads the endpoint from env.

        pyarrow has no credentials-provider argument; its AWS SDK reads the two variables when
        the filesystem is built and keeps re-fetching from that URI, so they are set only
        around the construction (other filesystems of the process are unaffected).
        """
        import pyarrow.fs

        kwargs: dict[str, Any] = {"region": self.region}
        if self.endpoint:
            parts = urlsplit(self.endpoint)
            kwargs["endpoint_override"] = parts.netloc + parts.path.rstrip("/")
            kwargs["scheme"] = parts.scheme or "https"
        with self.environment():
            return pyarrow.fs.S3FileSystem(**kwargs)

    @contextmanager
    def environment(self) -> Iterator[None]:
        """Set :meth:`env` in this process for the block, then restore what was there.

        Lance and deltalake build their AWS credential chain (``aws-config``: container
        provider, refreshed before expiry) from the environment when a write starts; keep the
        whole write inside the block. Not thread-safe: the environment is process-wide.
        """
        with _environment(self.env()):
            yield


@contextmanager
def _environment(values: Mapping[str, str]) -> Iterator[None]:
    saved = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def container_credentials(
    namespace: str,
    table: str,
    *,
    access: Access = "read",
    warehouse: str | None = None,
    region: str = "us-east-1",
    endpoint: str | None = None,
    config: ClientConfig | None = None,
) -> ContainerCredentials:
    """The container-credentials endpoint of this node's gateway for a table.

    ``config`` defaults to ``ClientConfig.resolve()`` (``LAKEGATE_URL``, ``LAKEGATE_TOKEN``,
    ``LAKEGATE_WAREHOUSE``). ``endpoint`` and ``region`` describe the object store.

    Raises:
        ConfigurationError: the gateway URL is not HTTP over TCP, or no warehouse is known.
    """
    config = config or ClientConfig.resolve()
    ep = config.endpoint
    if ep.protocol != "http" or ep.uds is not None:
        raise ConfigurationError(
            f"the AWS container endpoint needs the gateway's HTTP TCP address, not {ep.url!r}"
        )
    wh = warehouse or config.warehouse
    if not wh:
        raise ConfigurationError("no warehouse: pass warehouse= or set LAKEGATE_WAREHOUSE")
    parts = (quote(p, safe="") for p in (wh, namespace, table))
    uri = f"{ep.http_base_url}/v1/aws-credentials/{'/'.join(parts)}?access={access}"
    return ContainerCredentials(uri, config.token or _MARKER, region, endpoint)


def _expiry_iso(expires_at_ms: int | None) -> str:
    if expires_at_ms is None:
        raise ConfigurationError("the gateway served a credential without an expiry")
    return datetime.fromtimestamp(expires_at_ms / 1000.0, UTC).isoformat()


def _fetcher(
    client: Client, namespace: str, table: str, access: Access, warehouse: str | None,
    expected_location: str | None = None,
) -> Callable[[], dict[str, str]]:
    """A function returning botocore's credential metadata, fresh from the gateway (or memo),
    for the table at ``expected_location`` when given (else TableIdentityMismatchError)."""

    def fetch() -> dict[str, str]:
        s3 = client.credentials(namespace, table, warehouse=warehouse, access=access,
                                expected_location=expected_location).s3()
        return {
            "access_key": s3.access_key_id,
            "secret_key": s3.secret_access_key,
            "token": s3.session_token or "",
            "expiry_time": _expiry_iso(s3.expires_at_ms),
        }

    return fetch


def botocore_credentials(
    client: Client,
    namespace: str,
    table: str,
    *,
    access: Access = "read",
    warehouse: str | None = None,
    expected_location: str | None = None,
) -> RefreshableCredentials:
    """botocore credentials that re-ask the gateway (through ``client``) before they expire;
    with ``expected_location`` every refresh is for that table or fails (never a replaced
    table's prefix)."""
    from botocore.credentials import RefreshableCredentials

    fetch = _fetcher(client, namespace, table, access, warehouse, expected_location)
    return RefreshableCredentials.create_from_metadata(
        metadata=fetch(),
        refresh_using=fetch,
        method="lakegate-gateway",
        advisory_timeout=ADVISORY_REFRESH_S,
        mandatory_timeout=MANDATORY_REFRESH_S,
    )


def boto3_session(
    client: Client,
    namespace: str,
    table: str,
    *,
    access: Access = "read",
    warehouse: str | None = None,
    region: str = "us-east-1",
) -> boto3.Session:
    """A boto3 ``Session`` whose credentials refresh from the gateway (see above)."""
    import boto3
    import botocore.session

    core = botocore.session.get_session()
    # botocore has no public way to install refreshable credentials on a session.
    core._credentials = botocore_credentials(  # type: ignore[attr-defined]
        client, namespace, table, access=access, warehouse=warehouse
    )
    core.set_config_variable("region", region)
    return boto3.Session(botocore_session=core)


def s3fs_filesystem(
    client: Client,
    namespace: str,
    table: str,
    *,
    access: Access = "read",
    warehouse: str | None = None,
    region: str = "us-east-1",
    endpoint: str | None = None,
) -> Any:
    """An ``s3fs.S3FileSystem`` on aiobotocore refreshable credentials fed by the gateway.

    The refresh runs the (sync) client in a worker thread, so s3fs's event loop never blocks.
    Returns ``s3fs.S3FileSystem`` (typed ``Any``: s3fs ships no type information).
    """
    import asyncio

    import s3fs  # type: ignore[import-untyped]
    from aiobotocore.credentials import (  # type: ignore[import-untyped]
        AioRefreshableCredentials,
    )
    from aiobotocore.session import AioSession  # type: ignore[import-untyped]

    fetch = _fetcher(client, namespace, table, access, warehouse)

    async def refresh() -> dict[str, str]:
        return await asyncio.to_thread(fetch)

    session = AioSession()
    # aiobotocore, like botocore, has no public way to install refreshable credentials.
    session._credentials = AioRefreshableCredentials.create_from_metadata(
        metadata=fetch(),
        refresh_using=refresh,
        method="lakegate-gateway",
        advisory_timeout=ADVISORY_REFRESH_S,
        mandatory_timeout=MANDATORY_REFRESH_S,
    )
    kwargs: dict[str, Any] = {"client_kwargs": {"region_name": region}}
    if endpoint:
        kwargs["endpoint_url"] = endpoint
        kwargs["config_kwargs"] = {"s3": {"addressing_style": "path"}}
    return s3fs.S3FileSystem(session=session, skip_instance_cache=True, **kwargs)
