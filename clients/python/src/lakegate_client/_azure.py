"""ADLS Gen2: a vended SAS token → the option names each engine wants.

Lakekeeper vends ``adls.sas-token.<account>.<host-suffix>`` (directory-scoped to the table) and
``adls.sas-token-expires-at-ms.<account>.<host-suffix>``; the account comes from the key, not from
a separate ``adls.account-name`` (Lakekeeper does not emit one for generic tables).

Lakekeeper never vends an endpoint (it is always ``https://<account>.<host>``). A local store
(Azurite) is reached through a client setting, the blob endpoint URL with the account in its path
(``http://127.0.0.1:10000/devstoreaccount1``): ``LAKEGATE_ADLS_ENDPOINT`` or
``TableCredentials.with_storage_endpoint``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from lakegate_client._errors import UnsupportedStorageError

__all__ = ["AdlsSettings"]

_SAS_PREFIX = "adls.sas-token."
DEFAULT_SUFFIX = "dfs.core.windows.net"


def _account_from_location(location: str) -> str | None:
    # abfss://container@account.dfs.core.windows.net/path
    netloc = urlsplit(location).netloc
    if "@" not in netloc:
        return None
    return netloc.split("@", 1)[1].split(".", 1)[0] or None


@dataclass(frozen=True, repr=False)
class AdlsSettings:
    """The ADLS facts of one vended credential.

    ``sas_token`` is kept as vended (no leading ``?``); each adapter spells it as its library
    wants. ``endpoint`` is a local blob endpoint override (None: Azure's public endpoints).
    """

    account_name: str
    host_suffix: str
    sas_token: str = field(repr=False)
    account_host: str | None
    expires_at_ms: int | None
    endpoint: str | None = None

    def __repr__(self) -> str:
        return f"AdlsSettings(account_name={self.account_name!r}, <redacted>)"

    @classmethod
    def from_config(
        cls,
        config: Mapping[str, str],
        location: str,
        expires_at_ms: int | None,
        endpoint: str | None = None,
    ) -> AdlsSettings:
        """Pick the SAS token for the location's account.

        Raises:
            UnsupportedStorageError: no SAS token in the credential.
        """
        wanted = _account_from_location(location)
        tokens: list[tuple[str, str, str]] = []
        for key, value in config.items():
            if key.startswith(_SAS_PREFIX) and value:
                account, _, suffix = key[len(_SAS_PREFIX) :].partition(".")
                tokens.append((account, suffix or DEFAULT_SUFFIX, value))
        if (
            not tokens
            and config.get("adls.sas-token")
            and (config.get("adls.account-name") or wanted)
        ):
            account = config.get("adls.account-name") or wanted or ""
            tokens.append((account, DEFAULT_SUFFIX, config["adls.sas-token"]))
        if not tokens:
            raise UnsupportedStorageError(
                "the credential has no ADLS SAS token", type="NoVendedCredential"
            )
        chosen = next((t for t in tokens if t[0] == wanted), tokens[0])
        return cls(
            account_name=chosen[0],
            host_suffix=chosen[1],
            sas_token=chosen[2].lstrip("?"),
            account_host=config.get("adls.account-host"),
            expires_at_ms=expires_at_ms,
            endpoint=endpoint.rstrip("/") if endpoint else None,
        )

    @property
    def is_http(self) -> bool:
        """True when the endpoint override is plain HTTP (object_store needs telling)."""
        return self.endpoint is not None and self.endpoint.lower().startswith("http://")

    @property
    def blob_endpoint(self) -> str:
        """The account's blob endpoint URL (the override, else Azure's public one)."""
        if self.endpoint:
            return self.endpoint
        return f"https://{self.account_name}.{self.host_suffix.replace('dfs.', 'blob.', 1)}"

    def lance(self) -> dict[str, str]:
        """Lance / object_store ``storage_options``."""
        options = {
            "azure_storage_account_name": self.account_name,
            "azure_storage_sas_token": self.sas_token,
        }
        options.update(self._object_store_endpoint())
        if self.expires_at_ms:
            options["expires_at_millis"] = str(self.expires_at_ms)
        return options

    def delta(self) -> dict[str, str]:
        """deltalake ``storage_options`` (object_store keys, upper case)."""
        options = {
            "AZURE_STORAGE_ACCOUNT_NAME": self.account_name,
            "AZURE_STORAGE_SAS_TOKEN": self.sas_token,
        }
        if self.endpoint:
            options["azure_storage_endpoint"] = self.endpoint
            if self.is_http:
                options["allow_http"] = "true"  # AZURE_STORAGE_ALLOW_HTTP is not honoured
        return options

    def _object_store_endpoint(self) -> dict[str, str]:
        # object_store: `azure_endpoint` is the blob endpoint with the account in its path (as
        # Azurite serves it); `allow_http` for plain HTTP (AZURE_STORAGE_ALLOW_HTTP is ignored).
        if not self.endpoint:
            return {}
        options = {"azure_endpoint": self.endpoint}
        if self.is_http:
            options["allow_http"] = "true"
        return options

    def fsspec(self) -> dict[str, Any]:
        """adlfs ``AzureBlobFileSystem`` keyword arguments.

        adlfs forces https for an ``account_host``; a local endpoint goes in as a connection
        string (``BlobEndpoint`` + ``SharedAccessSignature``) instead.
        """
        if self.endpoint:
            return {
                "connection_string": (
                    f"BlobEndpoint={self.endpoint};SharedAccessSignature={self.sas_token}"
                ),
                "account_name": self.account_name,
            }
        kwargs: dict[str, Any] = {"account_name": self.account_name, "sas_token": self.sas_token}
        if self.account_host:
            kwargs["account_host"] = self.account_host
        return kwargs

    def pyarrow_kwargs(self) -> dict[str, Any]:
        """``pyarrow.fs.AzureFileSystem`` keyword arguments.

        Arrow appends ``sas_token`` to each request URL as is, so it must start with ``?``
        (without it every request names a wrong resource: 400 OutOfRangeInput).
        """
        kwargs: dict[str, Any] = {
            "account_name": self.account_name,
            "sas_token": "?" + self.sas_token,
        }
        if self.endpoint:
            parts = urlsplit(self.endpoint)
            for service in ("blob", "dfs"):
                kwargs[f"{service}_storage_authority"] = parts.netloc
                kwargs[f"{service}_storage_scheme"] = parts.scheme or "https"
        elif self.host_suffix != DEFAULT_SUFFIX:
            kwargs["dfs_storage_authority"] = self.host_suffix
        return kwargs

    def connection_string(self) -> str:
        """An Azure connection string (DuckDB's azure secret, azure-storage-blob)."""
        return f"BlobEndpoint={self.blob_endpoint};SharedAccessSignature={self.sas_token}"

    def hadoop_abfs(self) -> dict[str, str]:
        """Hadoop ABFS keys for a fixed SAS token (Hadoop 3.3.5+)."""
        host = f"{self.account_name}.{self.host_suffix}"
        return {
            f"fs.azure.account.auth.type.{host}": "SAS",
            f"fs.azure.sas.token.provider.type.{host}": (
                "org.apache.hadoop.fs.azurebfs.sas.FixedSASTokenProvider"
            ),
            f"fs.azure.sas.fixed.token.{host}": self.sas_token,
        }

    def env(self) -> dict[str, str]:
        """Environment variables read by object_store-based engines."""
        return self.delta()
