"""The SQL a DuckDB connection needs for a table or a warehouse (pure: no DuckDB import, no I/O).

Why DuckDB needs its own shapes:

- ``TYPE s3`` secrets (httpfs, delta) take ``KEY_ID``/``SECRET``/``SESSION_TOKEN``, an
  ``ENDPOINT`` without a scheme plus ``USE_SSL``, and ``URL_STYLE 'path'`` for path-style stores.
- The Lance extension reads object stores through Lance's own ``object_store`` and takes a
  ``TYPE lance`` secret whose keys are Lance's storage options (``aws_access_key_id``, ...).
- Lance's replacement scan (``FROM 's3://.../x.lance'``) only recognises paths ending in
  ``.lance``; catalog locations have no suffix, so the scan names the extension's table function.
- A directory table (parquet/csv/json) is every file with the format's suffix under the location.

- ADLS: the ``azure`` extension reads ``az://<container>/<key>`` (the blob API: a local store
  such as Azurite has no DFS endpoint for ``abfss://``) with a ``TYPE azure`` secret whose
  connection string carries the SAS and the blob endpoint.
- GCS: DuckDB takes HMAC keys only, never a bearer token: a vended GCS token cannot be used.

Every secret is scoped to the table's location, so two tables on one connection never mix keys.
"""

from __future__ import annotations

from urllib.parse import urlsplit

from lakegate_client._errors import UnsupportedStorageError
from lakegate_client.credentials import TableCredentials

__all__ = [
    "duckdb_location",
    "iceberg_attach_sql",
    "iceberg_token_secret_sql",
    "literal",
    "scan_expression",
    "table_secret_sql",
]

# The table function reading each table format, and what it is given after the location.
_SCANS = {
    "parquet": ("read_parquet", "/**/*.parquet"),
    "csv": ("read_csv", "/**/*.csv"),
    "json": ("read_json", "/**/*.json"),  # the suffix Lakegate writes (``tables/catalog.py``)
    "delta": ("delta_scan", ""),
    # The function behind the extension's `.lance` replacement scan (see the module docstring).
    "lance": ("__lance_scan", ""),
}
# Lance storage options that are not object-store settings (the expiry is ours, not Lance's).
_NOT_LANCE_OPTIONS = frozenset({"expires_at_millis"})


def literal(value: str) -> str:
    """A SQL string literal (single quotes doubled)."""
    return "'" + value.replace("'", "''") + "'"


def _identifier(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def duckdb_location(creds: TableCredentials) -> str:
    """The table's location as DuckDB reads it (``az://container/key`` for ADLS)."""
    if creds.storage == "adls":
        netloc = urlsplit(creds.location).netloc
        container = netloc.split("@", 1)[0]
        return f"az://{container}{urlsplit(creds.location).path}".rstrip("/")
    return creds.location.rstrip("/")


_location = duckdb_location


def scan_expression(fmt: str, location: str) -> str:
    """The FROM-clause expression reading a table of format ``fmt`` stored at ``location``.

    Raises:
        UnsupportedStorageError: DuckDB has no reader for that format here.
    """
    scan = _SCANS.get(fmt)
    if scan is None:
        raise UnsupportedStorageError(
            f"DuckDB cannot read {fmt!r} tables (known: {', '.join(sorted(_SCANS))})",
            type="UnsupportedFormat",
        )
    function, suffix = scan
    return f"{function}({literal(location.rstrip('/') + suffix)})"


def table_secret_sql(name: str, fmt: str, creds: TableCredentials) -> str:
    """``CREATE OR REPLACE SECRET`` giving DuckDB the table's credential, scoped to its location.

    Raises:
        UnsupportedStorageError: the credential is not an S3 one (DuckDB's ADLS/GCS secrets take
            other credential shapes than the ones vended).
    """
    scope = literal(_location(creds))
    if fmt == "lance":
        options = {
            k: v for k, v in creds.lance_storage_options().items() if k not in _NOT_LANCE_OPTIONS
        }
        pairs = ", ".join(f"{k} {literal(v)}" for k, v in sorted(options.items()))
        return f"CREATE OR REPLACE SECRET {_identifier(name)} (TYPE lance, SCOPE {scope}, {pairs})"
    if creds.storage == "adls":
        connection = creds._adls().connection_string()
        return (
            f"CREATE OR REPLACE SECRET {_identifier(name)} "
            f"(TYPE azure, CONNECTION_STRING {literal(connection)}, SCOPE {scope})"
        )
    if creds.storage != "s3":
        raise UnsupportedStorageError(
            f"DuckDB secrets are built for S3 and ADLS credentials; this table's are "
            f"{creds.storage} (DuckDB's GCS secrets take HMAC keys, never a vended token)",
            type="UnsupportedStorage",
        )
    s3 = creds.s3()
    parts = [
        "TYPE s3",
        f"KEY_ID {literal(s3.access_key_id)}",
        f"SECRET {literal(s3.secret_access_key)}",
        f"REGION {literal(s3.region)}",
        f"URL_STYLE {literal('path' if s3.path_style else 'vhost')}",
        f"SCOPE {scope}",
    ]
    if s3.session_token:
        parts.append(f"SESSION_TOKEN {literal(s3.session_token)}")
    if s3.endpoint:
        endpoint = urlsplit(s3.endpoint)
        host = endpoint.netloc or endpoint.path
        parts.append(f"ENDPOINT {literal(host.rstrip('/'))}")
        parts.append(f"USE_SSL {'false' if endpoint.scheme == 'http' else 'true'}")
    return f"CREATE OR REPLACE SECRET {_identifier(name)} ({', '.join(parts)})"


def iceberg_token_secret_sql(name: str, token: str) -> str:
    """An ``iceberg`` secret carrying a bearer token (DuckDB sends ``Authorization: Bearer``)."""
    return f"CREATE OR REPLACE SECRET {_identifier(name)} (TYPE iceberg, TOKEN {literal(token)})"


def iceberg_attach_sql(alias: str, warehouse: str, catalog_url: str, secret: str) -> str:
    """``ATTACH`` the gateway's Iceberg REST catalog (``<gateway>/catalog``) as ``alias``."""
    return (
        f"ATTACH {literal(warehouse)} AS {_identifier(alias)} "
        f"(TYPE iceberg, ENDPOINT {literal(catalog_url)}, SECRET {_identifier(secret)})"
    )
