"""The load `config` of a table served by the node's signer (no key material, ever).

Lakekeeper's keys when it signs (`service/storage/s3.rs`): `s3.remote-signing-enabled=true`,
`s3.signer=S3V4RestSigner` and `py-io-impl=pyiceberg.io.fsspec.FsspecFileIO` (pyiceberg signs
only through its fsspec FileIO), and the signer's base and endpoint in both spellings:
`signer.uri` / `signer.endpoint` (Iceberg >= 1.11) and `s3.signer.uri` / `s3.signer.endpoint`
(pyiceberg, older Iceberg Java). Through the gateway they name the gateway: base
`<gateway>/catalog/`, endpoint the table's own sign route (Iceberg 1.11's
`v1/{prefix}/namespaces/{namespace}/tables/{table}/sign`), which any node's gateway resolves
from the names alone (a tabular id would need the table to have been loaded on that node).
Every S3 key, session token and expiry key is removed, whatever the catalog put there.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

SIGNING_VALUES = frozenset({"remote-signing"})
KEY_MATERIAL = frozenset({
    "s3.access-key-id", "s3.secret-access-key", "s3.session-token",
    "s3.session-token-expires-at-ms", "expiration-time", "client.refresh-credentials-endpoint",
})
SIGNER_KEYS = ("signer.uri", "s3.signer.uri", "signer.endpoint", "s3.signer.endpoint")


def on_s3(location: str) -> bool:
    """Whether a table location is on S3 (the only store that signs)."""
    return location.split("://", 1)[0].lower() in ("s3", "s3a", "s3n")


def sign_endpoint(warehouse: str, namespace: str, table: str) -> str:
    """The table's sign route relative to `<gateway>/catalog/`, from the raw (still
    percent-encoded) path segments the client used."""
    return f"v1/{warehouse}/namespaces/{namespace}/tables/{table}/sign"


def signing_config(upstream: Mapping[str, Any] | None, signer_uri: str,
                   endpoint: str) -> dict[str, str]:
    """`upstream`'s string keys without key material, plus the signer keys."""
    out = {k: v for k, v in (upstream or {}).items()
           if isinstance(v, str) and k not in KEY_MATERIAL}
    out.update({
        "s3.remote-signing-enabled": "true",
        "s3.signer": "S3V4RestSigner",
        "py-io-impl": "pyiceberg.io.fsspec.FsspecFileIO",
        "signer.uri": signer_uri, "s3.signer.uri": signer_uri,
        "signer.endpoint": endpoint, "s3.signer.endpoint": endpoint,
    })
    return out
