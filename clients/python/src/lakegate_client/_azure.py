"""ADLS Gen2: a vended SAS token → the option names each engine wants.

Lakekeeper vends ``adls.sas-token.<account>.<host-suffix>`` (directory-scoped to the table) and
``adls.sas-token-expires-at-ms.<account>.<host-suffix>``; the account comes from the key, not from
a separate ``adls.account-name`` (Lakekeeper does not emit one for generic tables).
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
    """The ADLS facts of one vended credential."""

    account_name: str
    host_suffix: str
    sas_token: str = field(repr=False)
    account_host: str | None
    expires_at_ms: int | None

    def __repr__(self) -> str:
        return f"AdlsSettings(account_name={self.account_name!r}, <redacted>)"

    @classmethod
    def from_config(
        cls, config: Mapping[str, str], location: str, expires_at_ms: int | None
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
            sas_token=chosen[2],
            account_host=config.get("adls.account-host"),
            expires_at_ms=expires_at_ms,
        )

    def lance(self) -> dict[str, str]:
        """Lance / object_store ``storage_options``."""
        options = {
            "azure_storage_account_name": self.account_name,
            "azure_storage_sas_token": self.sas_token,
        }
        if self.expires_at_ms:
            options["expires_at_millis"] = str(self.expires_at_ms)
        return options

    def delta(self) -> dict[str, str]:
        """deltalake ``storage_options``."""
        return {
            "AZURE_STORAGE_ACCOUNT_NAME": self.account_name,
            "AZURE_STORAGE_SAS_TOKEN": self.sas_token,
        }

    def fsspec(self) -> dict[str, Any]:
        """adlfs ``AzureBlobFileSystem`` keyword arguments."""
        kwargs: dict[str, Any] = {"account_name": self.account_name, "sas_token": self.sas_token}
        if self.account_host:
            kwargs["account_host"] = self.account_host
        return kwargs

    def pyarrow_kwargs(self) -> dict[str, Any]:
        """``pyarrow.fs.AzureFileSystem`` keyword arguments."""
        kwargs: dict[str, Any] = {"account_name": self.account_name, "sas_token": self.sas_token}
        if self.host_suffix != DEFAULT_SUFFIX:
            kwargs["dfs_storage_authority"] = self.host_suffix
        return kwargs

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
