"""TableCredentials: one table's vended storage credential, and the shapes engines want.

A frozen snapshot: it never refreshes itself. Ask the client again (its memo makes that free while
the credential is comfortably valid) and rebuild the engine's filesystem per task.

>>> creds = client.credentials("demo_ns", "orders", access="write")
>>> lance.write_dataset(tbl, creds.location, storage_options=creds.lance_storage_options())
>>> deltalake.write_deltalake(creds.location, tbl, storage_options=creds.delta_storage_options())
>>> pq.write_table(tbl, path, filesystem=creds.pyarrow_filesystem())
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Literal
from urllib.parse import parse_qs, urlsplit

from lakegate_client._azure import AdlsSettings
from lakegate_client._clock import Clock, SystemClock
from lakegate_client._config import storage_endpoint
from lakegate_client._errors import UnsupportedStorageError
from lakegate_client._gcs import GcsSettings
from lakegate_client._s3 import S3Settings
from lakegate_client.log_redaction import keep_secrets_out_of_logs

if TYPE_CHECKING:
    import pyarrow.fs

__all__ = ["StorageCredential", "StorageKind", "TableCredentials", "expiry_from_config"]

StorageKind = Literal["s3", "adls", "gcs", "unknown"]

_SCHEMES: Mapping[str, StorageKind] = MappingProxyType(
    {
        "s3": "s3",
        "s3a": "s3",
        "s3n": "s3",
        "abfs": "adls",
        "abfss": "adls",
        "wasb": "adls",
        "wasbs": "adls",
        "gs": "gcs",
        "gcs": "gcs",
    }
)
# Any key naming key material; expiry and endpoint keys are not secret.
_SECRET_KEY = re.compile(r"(key|secret|token|sas|password|credential)", re.IGNORECASE)
_PUBLIC_KEY = re.compile(r"(expires|expiration|endpoint|key-id-name)", re.IGNORECASE)
_EXPIRY_KEYS = ("expiration-time", "s3.session-token-expires-at-ms", "gcs.oauth2.token-expires-at")


def _is_secret(key: str) -> bool:
    return bool(_SECRET_KEY.search(key)) and not _PUBLIC_KEY.search(key)


def redact(config: Mapping[str, str]) -> dict[str, str]:
    """A copy of ``config`` with every secret value replaced by ``***``."""
    return {k: ("***" if _is_secret(k) else v) for k, v in config.items()}


def expiry_from_config(config: Mapping[str, str]) -> int | None:
    """Earliest epoch-ms expiry named in a Lakekeeper credential config, or None.

    Reads ``expiration-time``, ``s3.session-token-expires-at-ms``, ``gcs.oauth2.token-expires-at``
    and every ``adls.sas-token-expires-at-ms.*`` (all epoch milliseconds as strings).
    """
    found: list[int] = []
    for key, value in config.items():
        if key in _EXPIRY_KEYS or key.startswith("adls.sas-token-expires-at-ms"):
            try:
                found.append(int(value))
            except (TypeError, ValueError):
                continue
    positive = [v for v in found if v > 0]
    return min(positive) if positive else None


def _normalized_prefix(uri: str) -> str:
    # s3a:// and s3n:// name the same objects as s3://; compare without a trailing slash.
    scheme, sep, rest = uri.partition("://")
    if _SCHEMES.get(scheme.lower()) == "s3":
        scheme = "s3"
    return f"{scheme.lower()}{sep}{rest}".rstrip("/")


def _covers(prefix: str, location: str) -> bool:
    p, loc = _normalized_prefix(prefix), _normalized_prefix(location)
    return loc == p or loc.startswith(p + "/")


@dataclass(frozen=True, repr=False)
class StorageCredential:
    """One vended credential as the gateway returned it: a location prefix and its config."""

    prefix: str
    config: Mapping[str, str] = field(repr=False)
    expires_at_ms: int | None = None

    def __repr__(self) -> str:
        return f"StorageCredential(prefix={self.prefix!r}, config={redact(self.config)!r})"


@dataclass(frozen=True, repr=False)
class TableCredentials:
    """A table's storage credential, merged and ready for engines.

    Attributes:
        location: the table's base location (``s3://bucket/...``).
        config: merged configuration: the load ``config`` (if any) overlaid with the credential
            whose prefix is the longest one covering ``location``.
        expires_at: when the credential expires (UTC), None if it carries no expiry.
        outcome: how the gateway answered: ``hit``, ``miss``, ``coalesced`` or ``stale``, or
            ``memo`` when the client's per-process memo answered without calling the gateway
            (empty when unknown, e.g. from a load).
        access: ``read`` or ``write``.
        warehouse_id, namespace, table: the table the credential is for.
        storage_credentials: every credential the gateway returned.
        served_remaining_s: remaining lifetime the gateway reported when it served this.
        table_id: the catalog's table id, when the gateway had confirmed it (else None).
        identity_ttl_s: how long from its answer the gateway said this table identity
            (``location``, ``table_id``) may be used without asking again; None from a gateway
            that does not say (the memo then assumes a short default).
        storage_endpoint: a local ADLS/GCS endpoint for the adapters (a client setting: no
            catalog vends one); None reads ``LAKEGATE_ADLS_ENDPOINT`` / ``LAKEGATE_GCS_ENDPOINT``.
    """

    location: str
    config: Mapping[str, str]
    expires_at: datetime | None
    outcome: str = ""
    access: str = "read"
    warehouse_id: str = ""
    namespace: tuple[str, ...] = ()
    table: str = ""
    storage_credentials: tuple[StorageCredential, ...] = ()
    served_remaining_s: float | None = None
    table_id: str | None = None
    identity_ttl_s: float | None = None
    storage_endpoint: str | None = None

    def __post_init__(self) -> None:  # its secrets never reach a library's log line
        keep_secrets_out_of_logs()

    def with_storage_endpoint(self, endpoint: str | None) -> TableCredentials:
        """A copy whose ADLS/GCS adapters reach ``endpoint`` (e.g. Azurite's blob endpoint)."""
        return replace(self, storage_endpoint=endpoint)

    def _endpoint(self) -> str | None:
        return self.storage_endpoint or storage_endpoint(self.storage)

    def is_identity(self, expected_location: str | None, table_id: str | None) -> bool:
        """Whether this answer is for the named table (an unconfirmed id is not a match)."""
        if expected_location and expected_location.rstrip("/") != self.location.rstrip("/"):
            return False
        return not table_id or (self.table_id or "").lower() == table_id.strip().lower()

    @classmethod
    def from_parts(
        cls,
        *,
        location: str,
        credentials: Sequence[StorageCredential],
        base_config: Mapping[str, str] | None = None,
        expires_at_ms: int | None = None,
        **fields: Any,
    ) -> TableCredentials:
        """Merge a gateway answer into one snapshot.

        The longest prefix covering ``location`` wins; with none covering it (a catalog that
        answers with a different scheme spelling, say) the credentials are applied in order, later
        ones winning, as pylakekeeper does.
        """
        covering = [c for c in credentials if _covers(c.prefix, location)]
        chosen: Iterable[StorageCredential]
        if covering:
            chosen = [max(covering, key=lambda c: len(_normalized_prefix(c.prefix)))]
        else:
            chosen = credentials
        merged: dict[str, str] = dict(base_config or {})
        chosen_expiries: list[int] = []
        for credential in chosen:
            merged.update(credential.config)
            if credential.expires_at_ms:
                chosen_expiries.append(credential.expires_at_ms)
        expiry = expires_at_ms or (min(chosen_expiries) if chosen_expiries else None)
        expiry = expiry or expiry_from_config(merged)
        return cls(
            location=location,
            config=merged,
            expires_at=datetime.fromtimestamp(expiry / 1000, tz=UTC) if expiry else None,
            storage_credentials=tuple(credentials),
            **fields,
        )

    # -- time --------------------------------------------------------------------------------

    @property
    def expires_at_ms(self) -> int | None:
        """Expiry as epoch milliseconds (the unit every vended key uses)."""
        return round(self.expires_at.timestamp() * 1000) if self.expires_at else None

    def remaining_at(self, now_s: float) -> float | None:
        """Seconds left at wall-clock ``now_s`` (negative once expired); None without expiry."""
        return self.expires_at.timestamp() - now_s if self.expires_at else None

    @property
    def remaining_s(self) -> float | None:
        """Seconds left now (system clock); None when the credential carries no expiry."""
        return self.remaining_at(SystemClock().now())

    def is_valid(self, floor_s: float = 0.0, clock: Clock | None = None) -> bool:
        """True while more than ``floor_s`` seconds remain (always True without an expiry)."""
        remaining = self.remaining_at((clock or SystemClock()).now())
        return remaining is None or remaining > floor_s

    # -- storage facts ----------------------------------------------------------------------

    @property
    def storage(self) -> StorageKind:
        """Which object store the location is on."""
        kind = _SCHEMES.get(urlsplit(self.location).scheme.lower())
        if kind:
            return kind
        if any(k.startswith("s3.") for k in self.config):
            return "s3"
        if any(k.startswith("adls.") for k in self.config):
            return "adls"
        if any(k.startswith("gcs.") for k in self.config):
            return "gcs"
        return "unknown"

    @property
    def uri(self) -> str:
        """``location`` with ``s3a://`` or ``s3n://`` spelled ``s3://`` (as Arrow engines want)."""
        scheme, sep, rest = self.location.partition("://")
        if sep and _SCHEMES.get(scheme.lower()) == "s3":
            return f"s3://{rest}"
        return self.location

    @property
    def bucket(self) -> str:
        """The bucket (or ADLS container, or GCS bucket) of ``location``."""
        netloc = urlsplit(self.location).netloc
        return netloc.split("@", 1)[0] if "@" in netloc else netloc

    def s3(self) -> S3Settings:
        """The normalised S3 facts.

        Raises:
            UnsupportedStorageError: the location is not on S3 or nothing was vended.
        """
        self._require("s3", "S3 settings")
        return S3Settings.from_config(self.config, self.expires_at_ms)

    def adls(self) -> AdlsSettings:
        """The normalised ADLS facts (account, SAS token, blob endpoint).

        Raises:
            UnsupportedStorageError: the location is not on ADLS or nothing was vended.
        """
        self._require("adls", "ADLS settings")
        return self._adls()

    def _adls(self) -> AdlsSettings:
        return AdlsSettings.from_config(
            self.config, self.location, self.expires_at_ms, self._endpoint()
        )

    def gcs(self) -> GcsSettings:
        """The normalised GCS facts (token, project, expiry, endpoint override).

        Raises:
            UnsupportedStorageError: the location is not on GCS or nothing was vended.
        """
        self._require("gcs", "GCS settings")
        return self._gcs()

    def _gcs(self) -> GcsSettings:
        return GcsSettings.from_config(self.config, self.expires_at_ms, self._endpoint())

    def _require(self, kind: StorageKind, target: str) -> None:
        if self.storage != kind:
            raise UnsupportedStorageError(f"{target} needs {kind}; this table is on {self.storage}")

    def _unsupported(self, target: str) -> UnsupportedStorageError:
        return UnsupportedStorageError(f"{target} does not support {self.storage} credentials")

    def _store(self, target: str) -> S3Settings | AdlsSettings | GcsSettings:
        """This credential's object-store facts, which every adapter is built from."""
        if self.storage == "gcs":
            return self._gcs()
        return self._keyed_store(target)

    def _keyed_store(self, target: str, gcs_target: str = "") -> S3Settings | AdlsSettings:
        """S3 or ADLS facts, for a ``target`` that cannot take a raw GCS access token (on GCS,
        the error names ``gcs_target``)."""
        if self.storage == "s3":
            return self.s3()
        if self.storage == "adls":
            return self._adls()
        if self.storage == "gcs" and gcs_target:
            raise GcsSettings.unsupported(gcs_target)
        raise self._unsupported(target)

    # -- adapters ---------------------------------------------------------------------------

    def lance_storage_options(self) -> dict[str, str]:
        """``lance.dataset(uri, storage_options=...)`` / ``write_dataset`` / ``write_fragments``."""
        return self._store("Lance").lance()

    def delta_storage_options(self) -> dict[str, str]:
        """``deltalake.DeltaTable(uri, storage_options=...)`` / ``write_deltalake``."""
        return self._keyed_store("deltalake", "deltalake").delta()

    def fsspec_kwargs(self) -> dict[str, Any]:
        """``s3fs.S3FileSystem(**kw)``, ``fsspec.open(url, **kw)``, pandas ``storage_options``
        (adlfs and gcsfs arguments for ADLS and GCS)."""
        return self._store("fsspec").fsspec()

    def boto3_kwargs(self) -> dict[str, Any]:
        """``boto3.client("s3", **kw)``: credentials, region, endpoint and addressing style."""
        if self.storage != "s3":
            raise self._unsupported("boto3")
        return self.s3().boto3()

    def pyarrow_filesystem(self) -> pyarrow.fs.FileSystem:
        """A ``pyarrow.fs`` filesystem (S3, Azure or GCS) built from the credential.

        Paths on it are ``bucket/key`` (no scheme): use ``creds.location.split("://", 1)[1]``.
        """
        import pyarrow.fs as pafs  # optional extra

        kwargs = self._store("pyarrow").pyarrow_kwargs()
        # Looked up by name, only for this storage: pyarrow < 16 (the [arrow] floor is 15) has no
        # AzureFileSystem, and naming it eagerly broke S3 there too.
        filesystems = {"s3": "S3FileSystem", "adls": "AzureFileSystem", "gcs": "GcsFileSystem"}
        filesystem: pyarrow.fs.FileSystem = getattr(pafs, filesystems[self.storage])(**kwargs)
        if self.storage == "adls":  # Arrow quotes each request URL, SAS included, in its errors
            from lakegate_client.redacted_fs import redacted_filesystem

            token = str(kwargs["sas_token"]).lstrip("?")
            return redacted_filesystem(filesystem, [token, *parse_qs(token).get("sig", [])])
        return filesystem

    def hadoop_s3a_conf(self, *, per_bucket: bool = False, spark: bool = False) -> dict[str, str]:
        """Hadoop configuration: S3A keys (ABFS fixed-SAS keys for ADLS).

        Args:
            per_bucket: scope the S3A keys to this table's bucket (``fs.s3a.bucket.<b>.*``).
            spark: prefix every key with ``spark.hadoop.`` for a SparkConf.
        """
        store = self._keyed_store("Hadoop", "the Hadoop GCS connector")
        if isinstance(store, S3Settings):
            conf = store.hadoop_s3a(self.bucket if per_bucket else None)
        else:
            conf = store.hadoop_abfs()
        return {f"spark.hadoop.{k}": v for k, v in conf.items()} if spark else conf

    def env(self) -> dict[str, str]:
        """Environment variables for a subprocess or SDK (``AWS_*``, ``AZURE_STORAGE_*``)."""
        return self._keyed_store("env", "environment variables").env()

    # -- safety -----------------------------------------------------------------------------

    def __repr__(self) -> str:
        return (
            f"TableCredentials(location={self.location!r}, expires_at={self.expires_at!r}, "
            f"outcome={self.outcome!r}, access={self.access!r}, config={redact(self.config)!r})"
        )

    __str__ = __repr__
