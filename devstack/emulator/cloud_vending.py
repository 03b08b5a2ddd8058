"""ADLS and GCS credentials in the shape Lakekeeper vends them (`az/mod.rs`, `gcs/mod.rs`).

ADLS: a SAS signed with the warehouse's shared access key (Lakekeeper's account-key path), keys
`adls.sas-token.<account>.<host>`, `adls.sas-token-expires-at-ms.<account>.<host>` and
`expiration-time`; start back-dated 60 s; read = `rl`, read-write-delete = `rawdl`. Lakekeeper
signs a directory SAS (`sr=d`) on the table path, and so does the emulator as the launcher
starts it (Azurite refuses `sr=d`; the stack's devstack/adls_guard.py enforces it); configured
with the `container` scope it signs a container SAS (`sr=c`) instead.
GCS: a token bounded to the bucket and the table prefix with a role (see gcs_tokens.py), keys
`gcs.oauth2.token`, `gcs.oauth2.token-expires-at`, `expiration-time` and `gcs.project-id`.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal
from urllib.parse import urlsplit

from devstack.emulator import gcs_tokens
from devstack.emulator.errors import ApiError
from devstack.emulator.policy import Permission
from devstack.emulator.sas import READ_PERMISSIONS, WRITE_PERMISSIONS, SasRequest, sign

ADLS_DEFAULT_HOST = "dfs.core.windows.net"
SAS_START_BACKDATE_S = 60
GCS_TOKEN_LIFETIME_S = 3600  # Google STS `expires_in`
SasScope = Literal["container", "directory"]


@dataclass(frozen=True, repr=False)
class KeyedCredential:
    """A vended ADLS SAS or GCS token: its config keys (secrets: never logged) and expiry."""

    config: Mapping[str, str] = field(repr=False)
    expires_at_ms: int

    def __repr__(self) -> str:
        return f"KeyedCredential(expires_at_ms={self.expires_at_ms})"


def storage_type(profile: Mapping[str, Any]) -> str:
    return str(profile.get("type", "s3"))


def adls_host(profile: Mapping[str, Any]) -> str:
    return str(profile.get("host") or ADLS_DEFAULT_HOST)


def validity_s(profile: Mapping[str, Any]) -> int:
    """The lifetime a profile asks for (each family names it differently)."""
    kind = storage_type(profile)
    if kind == "adls":
        return int(profile.get("sas-token-validity-seconds") or 3600)
    if kind == "gcs":
        return GCS_TOKEN_LIFETIME_S
    return int(profile.get("sts-token-validity-seconds", 3600))


def vending_enabled(profile: Mapping[str, Any]) -> bool:
    """S3: `sts-enabled`; ADLS: `sas-enabled` (default true); GCS: always (Lakekeeper)."""
    kind = storage_type(profile)
    if kind == "adls":
        return bool(profile.get("sas-enabled", True))
    if kind == "gcs":
        return True
    return bool(profile.get("sts-enabled"))


def _path_in_container(location: str) -> str:
    """`abfss://fs@acct.host/a/b` -> `a/b`; `gs://bucket/a/b` -> `a/b`."""
    return urlsplit(location).path.strip("/")


def mint_adls(
    profile: Mapping[str, Any], credential: Mapping[str, Any] | None, location: str,
    permission: Permission, lifetime_s: int, now_s: float, scope: SasScope,
) -> KeyedCredential:  # fmt: skip
    """A SAS for the table at `location`, as Lakekeeper's shared-access-key path signs it."""
    key = (credential or {}).get("key")
    if (credential or {}).get("credential-type") != "shared-access-key" or not key:
        raise ApiError(
            400, "Misconfiguration", "ADLS warehouse has no shared-access-key storage credential"
        )
    account, host = str(profile["account-name"]), adls_host(profile)
    now = dt.datetime.fromtimestamp(now_s, tz=dt.UTC)
    expiry = now + dt.timedelta(seconds=lifetime_s)
    request = SasRequest(
        account=account,
        container=str(profile["filesystem"]),
        permissions=READ_PERMISSIONS if permission is Permission.READ else WRITE_PERMISSIONS,
        start=now - dt.timedelta(seconds=SAS_START_BACKDATE_S),
        expiry=expiry,
        resource="d" if scope == "directory" else "c",
        path=_path_in_container(location),
    )
    # The SAS carries whole seconds: advertise exactly what the store enforces.
    expires_ms = int(expiry.replace(microsecond=0).timestamp() * 1000)
    token = sign(request, str(key))
    return KeyedCredential(
        config={
            f"adls.sas-token.{account}.{host}": token,
            f"adls.sas-token-expires-at-ms.{account}.{host}": str(expires_ms),
            "expiration-time": str(expires_ms),
        },
        expires_at_ms=expires_ms,
    )


def gcs_service_account(credential: Mapping[str, Any] | None) -> Mapping[str, Any]:
    cred = credential or {}
    key = cred.get("key")
    if cred.get("credential-type") != "service-account-key" or not isinstance(key, Mapping):
        raise ApiError(
            400, "Misconfiguration", "GCS warehouse has no service-account-key storage credential"
        )
    if not key.get("private_key"):
        raise ApiError(400, "Misconfiguration", "GCS service-account key has no private_key")
    return key


def mint_gcs(
    profile: Mapping[str, Any], credential: Mapping[str, Any] | None, location: str,
    permission: Permission, lifetime_s: int, now_s: float,
) -> KeyedCredential:  # fmt: skip
    """A token bounded to the table's prefix with the role of `permission`."""
    account = gcs_service_account(credential)
    expires_ms = int((now_s + lifetime_s) * 1000)
    grant = gcs_tokens.TokenGrant(
        bucket=str(profile["bucket"]),
        prefix=_path_in_container(location),
        role="read" if permission is Permission.READ else "write",
        expires_at_ms=expires_ms,
    )
    token = gcs_tokens.mint(grant, gcs_tokens.signing_key(str(account["private_key"])))
    config = {
        "gcs.oauth2.token": token,
        "gcs.oauth2.token-expires-at": str(expires_ms),
        "expiration-time": str(expires_ms),
    }
    if account.get("project_id"):
        config["gcs.project-id"] = str(account["project_id"])
    return KeyedCredential(config=config, expires_at_ms=expires_ms)


def base_location(profile: Mapping[str, Any]) -> str:
    """The warehouse's root location in its family's scheme (no trailing slash)."""
    prefix = str(profile.get("key-prefix") or "").strip("/")
    kind = storage_type(profile)
    if kind == "adls":
        root = f"abfss://{profile['filesystem']}@{profile['account-name']}.{adls_host(profile)}"
    elif kind == "gcs":
        root = f"gs://{profile['bucket']}"
    else:
        root = f"s3://{profile['bucket']}"
    return f"{root}/{prefix}" if prefix else root
