"""Spark's own readers and writers (S3A, ABFS, the GCS connector) with the node's credentials.

``hadoop_options(client, "ns", "t", access="read")`` returns the Hadoop options one read or
write of that table needs; the executors' filesystems then ask their node's gateway for the
table's credential through the JVM providers of ``lakegate-hadoop`` (clients/jvm, on
``spark.jars``), cached in each executor JVM::

    table = hadoop_table(client, "ns", "events")
    spark.read.options(**table.options).parquet(table.path)
    df.write.options(**hadoop_options(client, "ns", "events", access="write")).parquet(table.path)

Per-table credentials and Hadoop's filesystem cache: Hadoop caches one ``FileSystem`` per
scheme, bucket and user, built from the first configuration that asked, so a second table in the
same bucket would get the first table's provider. The options therefore turn that cache off for
the scheme (``fs.<scheme>.impl.disable.cache``), as Unity Catalog's Spark connector does for its
table credentials: each read builds its own filesystem with its own table's provider, and the
providers share one credential cache per JVM, so the cost is a filesystem (and S3 client)
per ``FileSystem.get``, never a gateway call (loadtest measures it).

The options hold no secret: the gateway URL and the table's names (plus a caller token only if
one is passed; Spark redacts option keys matching ``token`` in plans and the UI). The driver asks
the gateway once here, for the location and the store's endpoint settings.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from lakegate_client._config import storage_endpoint
from lakegate_client._errors import UnsupportedStorageError
from lakegate_client._models import Access, Namespace
from lakegate_client._s3 import S3Settings

if TYPE_CHECKING:
    from lakegate_client import Client

__all__ = ["GCS_PROVIDER", "S3_PROVIDER", "SAS_PROVIDER", "HadoopTable", "hadoop_options",
           "hadoop_path", "hadoop_table"]

S3_PROVIDER = "dev.lakegate.hadoop.LakegateS3CredentialsProvider"
GCS_PROVIDER = "dev.lakegate.hadoop.LakegateGcsAccessTokenProvider"
SAS_PROVIDER = "dev.lakegate.hadoop.LakegateSasTokenProvider"
NAMESPACE_SEPARATOR = "\x1f"


@dataclass(frozen=True)
class HadoopTable:
    """Where a table's files are for Hadoop (``s3a://``, ``abfss://``, ``gs://``) and the options
    a read or write of them needs."""

    path: str
    options: Mapping[str, str]


def _gateway_http_url(client: Client) -> str:
    endpoint = client.config.endpoint
    if endpoint.protocol != "http" or endpoint.uds is not None or endpoint.host is None:
        raise UnsupportedStorageError(
            "the JVM providers reach the gateway over loopback HTTP: build the client with the "
            "gateway's http:// URL (Java's HTTP client has no Unix-socket or gRPC transport)",
            type="UnsupportedGatewayUrl",
        )
    return f"{endpoint.scheme}://{endpoint.host}:{endpoint.port}"


def _s3(config: Mapping[str, str], expires_at_ms: int | None) -> dict[str, str]:
    s3 = S3Settings.from_config(config, expires_at_ms)
    out = {
        "fs.s3a.aws.credentials.provider": S3_PROVIDER,
        "fs.s3a.impl.disable.cache": "true",
        "fs.s3a.endpoint.region": s3.region,
        "fs.s3a.path.style.access": "true" if s3.path_style else "false",
    }
    if s3.endpoint:
        out["fs.s3a.endpoint"] = s3.endpoint
        out["fs.s3a.connection.ssl.enabled"] = "false" if s3.is_http else "true"
    return out


def _gcs(storage_endpoint: str | None) -> dict[str, str]:
    out = {
        "fs.gs.impl": "com.google.cloud.hadoop.fs.gcs.GoogleHadoopFileSystem",
        "fs.gs.auth.type": "ACCESS_TOKEN_PROVIDER",
        "fs.gs.auth.access.token.provider": GCS_PROVIDER,
        "fs.gs.impl.disable.cache": "true",
        # A create first looks for a conflicting directory at each parent of the file, up to
        # the bucket's root: outside the table's prefix, so the table-scoped token is refused
        # (403) and every write fails. The writers here (Spark's committers, delta-spark) make
        # their own names, so the check guards nothing they need.
        "fs.gs.create.items.conflict.check.enable": "false",
    }
    if storage_endpoint:
        out["fs.gs.storage.root.url"] = storage_endpoint.rstrip("/") + "/"
        # A GCS stand-in (fake-gcs-server) has no objects.move, which the connector's rename
        # uses by default: rename by rewrite + delete (batched) instead, as before that API.
        out["fs.gs.operation.move.enable"] = "false"
    return out


def _abfs() -> dict[str, str]:
    return {
        "fs.azure.account.auth.type": "SAS",
        "fs.azure.sas.token.provider.type": SAS_PROVIDER,
        "fs.abfs.impl.disable.cache": "true",
        "fs.abfss.impl.disable.cache": "true",
    }


def hadoop_path(location: str) -> str:
    """A location as Hadoop names it: ``s3://`` is S3A's ``s3a://``; the others as they are."""
    if location.startswith("s3://"):
        return "s3a://" + location[len("s3://"):]
    return location


def hadoop_table(client: Client, namespace: Namespace, table: str, access: Access = "read", *,
                 warehouse: str | None = None, token: str | None = None,
                 token_file: str | None = None) -> HadoopTable:
    """The table's Hadoop path and the options for a read (``access="read"``) or a write.

    ``token`` / ``token_file``: what the executors' providers send the gateway (a gateway in
    token mode); a file (a projected service-account token) is read again at every call.

    Raises:
        UnsupportedStorageError: the client does not reach the gateway over loopback HTTP, or
            the table's store has no Hadoop filesystem here.
    """
    url = _gateway_http_url(client)
    creds = client.credentials(namespace, table, warehouse=warehouse, access=access)
    levels = (namespace,) if isinstance(namespace, str) else tuple(namespace)
    options = {
        "fs.lakegate.url": url,
        "fs.lakegate.warehouse": warehouse or client.config.warehouse or "",
        "fs.lakegate.namespace": NAMESPACE_SEPARATOR.join(levels),
        "fs.lakegate.table": table,
        "fs.lakegate.access": access,
    }
    if token is not None:
        options["fs.lakegate.token"] = token
    if token_file is not None:
        options["fs.lakegate.token.file"] = token_file
    scheme = creds.location.split("://", 1)[0].lower()
    if scheme in ("s3", "s3a"):
        expires = int(creds.expires_at.timestamp() * 1000) if creds.expires_at else None
        options.update(_s3(creds.config, expires))
    elif scheme == "gs":
        # A local GCS (LAKEGATE_GCS_ENDPOINT): Lakekeeper vends no endpoint for GCS.
        options.update(_gcs(creds.storage_endpoint or storage_endpoint("gcs")))
    elif scheme in ("abfs", "abfss"):
        options.update(_abfs())
    else:
        raise UnsupportedStorageError(f"no Hadoop filesystem for {scheme}:// here",
                                      type="UnsupportedStorage")
    return HadoopTable(hadoop_path(creds.location), options)


def hadoop_options(client: Client, namespace: Namespace, table: str, access: Access = "read",
                   **kwargs: str | None) -> dict[str, str]:
    """The options of :func:`hadoop_table` alone (``spark.read.options(**...)``)."""
    return dict(hadoop_table(client, namespace, table, access, **kwargs).options)
