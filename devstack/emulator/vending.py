"""Credential vending: a real STS AssumeRole on SeaweedFS, behind Lakekeeper's STC cache.

- AssumeRole with `RoleSessionName=lakekeeper-sts`, `DurationSeconds` from the storage profile
  (at least 900, STS's minimum), `RoleArn` from `sts-role-arn`/`assume-role-arn`, and the inline
  session policy of `policy.py` scoped to the table location.
- STC cache (as Lakekeeper's short-term-credential cache behaves): key = (location,
  permission, warehouse, table, hash of
  profile and credential, advertised validity); an entry is reused for min(validity / 2, 1 h),
  measured from the configured validity; concurrent misses share one STS call; errors are not
  cached. Callers therefore see 50-100 % of the lifetime left, as with the real server.
- The `credential_lifetime_s` fault shortens the ADVERTISED lifetime (and the cache lifetime)
  while the credential itself still comes from STS with its real >= 900 s lifetime.
boto3 is blocking, so STS calls run in a worker thread with a cached client.
ADLS and GCS warehouses are minted locally instead (cloud_vending.py: a SAS signed with the
account key, a token signed with the service-account key), behind the same STC cache and
lifetime fault; the `sts_assume_role` counter counts every mint.
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import json
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import KW_ONLY, dataclass, field
from typing import Any

import boto3
import botocore.config
import botocore.exceptions

from devstack.emulator.cloud_vending import (
    KeyedCredential,
    SasScope,
    mint_adls,
    mint_gcs,
    storage_type,
    validity_s,
)
from devstack.emulator.errors import ApiError
from devstack.emulator.models import GenericTable, Warehouse
from devstack.emulator.policy import Permission, session_policy_json

STC_MAX_ENTRY_S = 3600.0
STC_CAPACITY = 10_000
STS_MIN_DURATION_S = 900


@dataclass(frozen=True)
class TemporaryCredential:
    """One STS result plus the expiry the emulator advertises for it (secrets: never logged)."""

    access_key_id: str
    secret_access_key: str
    session_token: str
    expires_at_ms: int

    def __repr__(self) -> str:
        return (
            f"TemporaryCredential(access_key_id={self.access_key_id}, "
            f"expires_at_ms={self.expires_at_ms})"
        )


# What one vend returns: an STS credential (S3) or config keys (ADLS SAS, GCS token).
Vended = TemporaryCredential | KeyedCredential


def endpoint_with_slash(endpoint: str) -> str:
    """Lakekeeper serialises the endpoint from a parsed URL, so it ends with `/`."""
    return endpoint if endpoint.endswith("/") else endpoint + "/"


def region_config(profile: dict[str, Any]) -> dict[str, str]:
    """Keys present with or without vended credentials."""
    region = str(profile.get("region", "us-east-1"))
    out = {"s3.region": region, "client.region": region}
    if profile.get("endpoint"):
        out["s3.endpoint"] = endpoint_with_slash(str(profile["endpoint"]))
    if profile.get("path-style-access"):
        out["s3.path-style-access"] = "true"
    return out


def credential_config(profile: dict[str, Any], cred: Vended) -> dict[str, str]:
    """`storage-credentials[].config` of a vended credential."""
    if isinstance(cred, KeyedCredential):
        return dict(cred.config)
    out = region_config(profile)
    out.update(
        {
            "s3.access-key-id": cred.access_key_id,
            "s3.secret-access-key": cred.secret_access_key,
            "s3.session-token": cred.session_token,
            "s3.session-token-expires-at-ms": str(cred.expires_at_ms),
            "expiration-time": str(cred.expires_at_ms),
        }
    )
    return out


def load_config(profile: dict[str, Any], cred: Vended | None) -> dict[str, str]:
    """Top-level `config` of a load response: region/endpoint keys, raw keys, no expiry keys.

    ADLS and GCS have no region or endpoint keys: the raw credential keys only.
    """
    if storage_type(profile) != "s3":
        if not isinstance(cred, KeyedCredential):
            return {}
        return {
            k: v for k, v in cred.config.items()
            if "expires-at" not in k and k != "expiration-time"
        }  # fmt: skip
    assert not isinstance(cred, KeyedCredential)
    out = region_config(profile)
    out["region"] = out["s3.region"]
    if cred is not None:
        out.update(
            {
                "s3.access-key-id": cred.access_key_id,
                "s3.secret-access-key": cred.secret_access_key,
                "s3.session-token": cred.session_token,
            }
        )
    return out


def _digest(value: object) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True).encode()).hexdigest()[:16]


def _static_keys(warehouse: Warehouse) -> tuple[str, str]:
    cred = warehouse.storage_credential or {}
    ak = cred.get("access-key-id") or cred.get("aws-access-key-id")
    sk = cred.get("secret-access-key") or cred.get("aws-secret-access-key")
    if not ak or not sk:
        raise ApiError(400, "Misconfiguration", "Warehouse has no access-key storage credential")
    return str(ak), str(sk)


class StsClient:
    """Blocking boto3 STS calls, one cached client per (endpoint, access key).

    `CredentialVendor` needs only `assume_role`; tests pass a fake with the same method.
    """

    def __init__(self) -> None:
        self._clients: dict[tuple[str, str], Any] = {}

    def assume_role(
        self,
        *,
        endpoint: str,
        region: str,
        access_key: str,
        secret_key: str,
        role_arn: str | None,
        duration_s: int,
        policy: str,
    ) -> tuple[str, str, str, float]:
        """Return (access key, secret, session token, expiration epoch seconds)."""
        key = (endpoint, access_key)
        client = self._clients.get(key)
        if client is None:
            client = boto3.session.Session().client(
                "sts",
                endpoint_url=endpoint,
                region_name=region,
                aws_access_key_id=access_key,
                aws_secret_access_key=secret_key,
                config=botocore.config.Config(
                    retries={"max_attempts": 2, "mode": "standard"},
                    connect_timeout=3,
                    read_timeout=10,
                ),
            )
            self._clients[key] = client
        kwargs: dict[str, Any] = {
            "RoleSessionName": "lakekeeper-sts",
            "DurationSeconds": duration_s,
            "Policy": policy,
        }
        if role_arn:
            kwargs["RoleArn"] = role_arn
        result = client.assume_role(**kwargs)["Credentials"]
        return (
            result["AccessKeyId"],
            result["SecretAccessKey"],
            result["SessionToken"],
            result["Expiration"].timestamp(),
        )


@dataclass
class _Entry:
    cred: Vended
    reuse_until: float  # monotonic


# repr=False: the cache holds credentials, which must never reach a log line.
@dataclass(eq=False, repr=False)
class CredentialVendor:
    """STS AssumeRole behind the STC cache with single-flight per key."""

    sts: StsClient
    _: KW_ONLY
    on_sts_call: Callable[[], None]
    lifetime_override: Callable[[], int | None]
    sts_fault: Callable[[], bool] = lambda: False
    # ADLS: sign a container SAS (what Azurite enforces) or Lakekeeper's directory SAS (shape).
    adls_sas_scope: SasScope = "container"
    monotonic: Callable[[], float] = time.monotonic
    wall_clock: Callable[[], float] = time.time
    _cache: OrderedDict[tuple[str, ...], _Entry] = field(default_factory=OrderedDict, init=False)
    _inflight: dict[tuple[str, ...], asyncio.Future[Vended]] = field(
        default_factory=dict, init=False
    )
    _storage_digests: dict[str, str] = field(default_factory=dict, init=False)

    def _storage_digest(self, warehouse: Warehouse) -> str:
        """Hash of (profile, credential): part of the key, cached per warehouse (immutable)."""
        digest = self._storage_digests.get(warehouse.id)
        if digest is None:
            digest = _digest([warehouse.storage_profile, warehouse.storage_credential])
            self._storage_digests[warehouse.id] = digest
        return digest

    def clear(self) -> None:
        self._cache.clear()

    async def vend(
        self, warehouse: Warehouse, table: GenericTable, permission: Permission
    ) -> Vended:
        profile = warehouse.storage_profile
        validity = validity_s(profile)
        override = self.lifetime_override()
        advertised = min(validity, override) if override else validity
        key = (
            table.base_location,
            permission.value,
            warehouse.id,
            table.id,
            self._storage_digest(warehouse),
            str(advertised),
        )
        entry = self._cache.get(key)
        if entry is not None and self.monotonic() < entry.reuse_until:
            return entry.cred
        pending = self._inflight.get(key)
        if pending is None:
            pending = asyncio.ensure_future(
                self._fetch(key, warehouse, table, permission, validity, advertised)
            )
            self._inflight[key] = pending
            pending.add_done_callback(functools.partial(self._forget, key))
        # shield: a caller that disconnects must not cancel the STS call the others wait for
        return await asyncio.shield(pending)

    def _forget(self, key: tuple[str, ...], fut: asyncio.Future[Vended]) -> None:
        if self._inflight.get(key) is fut:
            del self._inflight[key]
        if not fut.cancelled():
            fut.exception()  # mark retrieved even if every waiter went away

    async def _fetch(
        self,
        key: tuple[str, ...],
        warehouse: Warehouse,
        table: GenericTable,
        permission: Permission,
        validity: int,
        advertised: int,
    ) -> Vended:
        profile = warehouse.storage_profile
        kind = storage_type(profile)
        if kind in ("adls", "gcs"):
            self.on_sts_call()
            if self.sts_fault():
                raise ApiError(412, "ShortTermCredentialError", f"Failed to vend {kind} credential")
            now_s = self.wall_clock()
            keyed = (
                mint_adls(profile, warehouse.storage_credential, table.base_location, permission,
                          advertised, now_s, self.adls_sas_scope)
                if kind == "adls"
                else mint_gcs(profile, warehouse.storage_credential, table.base_location,
                              permission, advertised, now_s)
            )  # fmt: skip
            self._remember(key, keyed, advertised)
            return keyed
        access_key, secret_key = _static_keys(warehouse)
        endpoint = str(profile.get("sts-endpoint") or profile.get("endpoint") or "")
        if not endpoint:
            raise ApiError(400, "Misconfiguration", "Storage profile has no STS endpoint")
        self.on_sts_call()
        if self.sts_fault():
            raise ApiError(
                412, "ShortTermCredentialError", "Failed to assume role via STS: Throttling"
            )
        try:
            ak, sk, token, expires_s = await asyncio.to_thread(
                self.sts.assume_role,
                endpoint=endpoint,
                region=str(profile.get("region", "us-east-1")),
                access_key=access_key,
                secret_key=secret_key,
                role_arn=profile.get("sts-role-arn") or profile.get("assume-role-arn"),
                duration_s=max(STS_MIN_DURATION_S, validity),
                policy=session_policy_json(table.base_location, permission),
            )
        except (botocore.exceptions.BotoCoreError, botocore.exceptions.ClientError) as exc:
            code = ""
            if isinstance(exc, botocore.exceptions.ClientError):
                code = str(exc.response.get("Error", {}).get("Code", ""))
            raise ApiError(
                412,
                "ShortTermCredentialError",
                f"Failed to assume role via STS: {code or type(exc).__name__}",
            ) from exc
        issued = self.wall_clock()
        expires_ms = int(min(expires_s, issued + advertised) * 1000)
        cred = TemporaryCredential(ak, sk, token, expires_ms)
        self._remember(key, cred, advertised)
        return cred

    def _remember(self, key: tuple[str, ...], cred: Vended, advertised: int) -> None:
        reuse_s = min(advertised / 2.0, STC_MAX_ENTRY_S)
        self._cache[key] = _Entry(cred=cred, reuse_until=self.monotonic() + reuse_s)
        self._cache.move_to_end(key)
        while len(self._cache) > STC_CAPACITY:
            self._cache.popitem(last=False)
