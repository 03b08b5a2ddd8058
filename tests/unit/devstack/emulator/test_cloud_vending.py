"""ADLS and GCS vending: Lakekeeper's keys, SAS scope and permissions, cache, lifetime fault."""

from __future__ import annotations

import datetime as dt
from urllib.parse import parse_qs

import pytest

from devstack.emulator import gcs_tokens
from devstack.emulator.cloud_vending import KeyedCredential, base_location
from devstack.emulator.errors import ApiError
from devstack.emulator.models import GenericTable, Warehouse
from devstack.emulator.policy import Permission
from devstack.emulator.sas import DEV_ACCOUNT, DEV_ACCOUNT_KEY, SasRequest, sign
from devstack.emulator.vending import CredentialVendor, credential_config, load_config

ADLS = {
    "type": "adls", "filesystem": "fs1", "account-name": DEV_ACCOUNT,
    "host": "dfs.core.windows.net", "key-prefix": "pre", "sas-token-validity-seconds": 3600,
}  # fmt: skip
ADLS_CRED = {"type": "az", "credential-type": "shared-access-key", "key": DEV_ACCOUNT_KEY}
SA_KEY = {"private_key": "-----not-a-real-key-----", "project_id": "proj-1"}
GCS = {"type": "gcs", "bucket": "gb", "key-prefix": "pre"}
GCS_CRED = {"type": "gcs", "credential-type": "service-account-key", "key": SA_KEY}
SAS_KEY = f"adls.sas-token.{DEV_ACCOUNT}.dfs.core.windows.net"
SAS_EXPIRY_KEY = f"adls.sas-token-expires-at-ms.{DEV_ACCOUNT}.dfs.core.windows.net"


class NoSts:
    def assume_role(self, **kwargs: object) -> tuple[str, str, str, float]:
        raise AssertionError("ADLS and GCS never call STS")


def _warehouse(profile: dict, cred: dict | None) -> Warehouse:
    return Warehouse(
        id="w1", project_id="p", name="w", storage_profile=profile, storage_credential=cred,
        delete_profile={"type": "hard"}, status="active", protected=False,
    )  # fmt: skip


def _table(wh: Warehouse, tid: str = "t1") -> GenericTable:
    return GenericTable(
        id=tid, warehouse_id="w1", namespace_id="n", name=tid, format="parquet",
        base_location=f"{wh.base_location}/{tid}", doc=None, properties={}, schema=None,
        statistics=None, protected=False, protected_updated_at_us=None, created_at_us=1,
        deleted_at_us=None, expiration_at_us=None,
    )  # fmt: skip


def _vendor(
    clock: list[float], override: list[int | None], scope: str = "container"
) -> tuple[CredentialVendor, list[int]]:
    counted: list[int] = []
    vendor = CredentialVendor(
        NoSts(),  # type: ignore[arg-type]
        on_sts_call=lambda: counted.append(1),
        lifetime_override=lambda: override[0],
        adls_sas_scope=scope,  # type: ignore[arg-type]
        monotonic=lambda: clock[0],
        wall_clock=lambda: clock[0],
    )
    return vendor, counted


def test_base_locations_per_family() -> None:
    assert base_location(ADLS) == f"abfss://fs1@{DEV_ACCOUNT}.dfs.core.windows.net/pre"
    assert base_location({**ADLS, "host": None, "key-prefix": None}) == (
        f"abfss://fs1@{DEV_ACCOUNT}.dfs.core.windows.net"
    )
    assert base_location(GCS) == "gs://gb/pre"


async def test_adls_vend_has_lakekeepers_keys_and_a_container_sas_by_default() -> None:
    clock = [1_800_000_000.0]
    vendor, counted = _vendor(clock, [None])
    wh = _warehouse(ADLS, ADLS_CRED)
    cred = await vendor.vend(wh, _table(wh), Permission.READ)
    assert isinstance(cred, KeyedCredential)
    config = credential_config(ADLS, cred)
    expires_ms = str(int((clock[0] + 3600) * 1000))
    assert set(config) == {SAS_KEY, SAS_EXPIRY_KEY, "expiration-time"}
    assert config[SAS_EXPIRY_KEY] == config["expiration-time"] == expires_ms
    sas = parse_qs(config[SAS_KEY])
    assert not config[SAS_KEY].startswith("?")  # vended as Lakekeeper does: no `?`
    assert sas["sr"] == ["c"]
    assert sas["sp"] == ["rl"]
    assert "sdd" not in sas
    assert sas["st"] == ["2027-01-15T07:59:00Z"]  # back-dated 60 s
    assert sas["se"] == ["2027-01-15T09:00:00Z"]
    assert counted == [1]
    # The signature is the development account key's over exactly these fields.
    start = dt.datetime(2027, 1, 15, 7, 59, tzinfo=dt.UTC)
    expected = sign(
        SasRequest(DEV_ACCOUNT, "fs1", "rl", start, start + dt.timedelta(seconds=3660)),
        DEV_ACCOUNT_KEY,
    )
    assert config[SAS_KEY] == expected
    # The load's top-level config carries the token but no expiry keys.
    assert load_config(ADLS, cred) == {SAS_KEY: config[SAS_KEY]}
    assert load_config(ADLS, None) == {}


async def test_adls_write_permissions_and_lakekeepers_directory_sas_shape() -> None:
    clock = [1_800_000_000.0]
    vendor, _ = _vendor(clock, [None], scope="directory")
    wh = _warehouse(ADLS, ADLS_CRED)
    cred = await vendor.vend(wh, _table(wh), Permission.READ_WRITE_DELETE)
    sas = parse_qs(credential_config(ADLS, cred)[SAS_KEY])
    assert sas["sr"] == ["d"]
    assert sas["sdd"] == ["2"]  # pre/t1
    assert sas["sp"] == ["rawdl"]  # Lakekeeper: r,w,a,l + d


def test_sas_signature_matches_the_azure_sdk() -> None:
    from azure.storage.blob._shared_access_signature import BlobSharedAccessSignature

    start = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
    expiry = start + dt.timedelta(hours=1)
    sdk = BlobSharedAccessSignature(DEV_ACCOUNT, DEV_ACCOUNT_KEY)
    sdk.x_ms_version = "2022-11-02"
    theirs = sdk.generate_container(
        "c1", permission="rl", expiry=expiry, start=start, protocol="https,http"
    )
    ours = sign(SasRequest(DEV_ACCOUNT, "c1", "rl", start, expiry), DEV_ACCOUNT_KEY)
    assert parse_qs(ours) == parse_qs(theirs)


async def test_adls_cache_and_lifetime_fault_shorten_the_real_sas_expiry() -> None:
    clock, override = [1_800_000_000.0], [5]
    vendor, counted = _vendor(clock, override)
    wh = _warehouse(ADLS, ADLS_CRED)
    first = await vendor.vend(wh, _table(wh), Permission.READ)
    assert first.expires_at_ms == int((clock[0] + 5) * 1000)
    assert parse_qs(credential_config(ADLS, first)[SAS_KEY])["se"] == ["2027-01-15T08:00:05Z"]
    clock[0] += 2
    assert await vendor.vend(wh, _table(wh), Permission.READ) is first  # half the lifetime
    clock[0] += 1
    assert await vendor.vend(wh, _table(wh), Permission.READ) is not first
    assert counted == [1, 1]


async def test_adls_without_a_shared_key_credential_is_a_misconfiguration() -> None:
    vendor, _ = _vendor([0.0], [None])
    wh = _warehouse(ADLS, {"type": "az", "credential-type": "client-credentials"})
    with pytest.raises(ApiError) as info:
        await vendor.vend(wh, _table(wh), Permission.READ)
    assert info.value.status == 400


async def test_gcs_vend_has_lakekeepers_keys_and_a_token_bounded_to_the_table() -> None:
    clock = [1_800_000_000.0]
    vendor, _ = _vendor(clock, [None])
    wh = _warehouse(GCS, GCS_CRED)
    read = credential_config(GCS, await vendor.vend(wh, _table(wh), Permission.READ))
    expires_ms = str(int((clock[0] + 3600) * 1000))
    assert read["gcs.oauth2.token-expires-at"] == read["expiration-time"] == expires_ms
    assert read["gcs.project-id"] == "proj-1"
    key = gcs_tokens.signing_key(SA_KEY["private_key"])
    grant = gcs_tokens.verify(read["gcs.oauth2.token"], key)
    assert grant == gcs_tokens.TokenGrant("gb", "pre/t1", "read", int(expires_ms))
    write = credential_config(
        GCS, await vendor.vend(wh, _table(wh), Permission.READ_WRITE_DELETE)
    )
    write_grant = gcs_tokens.verify(write["gcs.oauth2.token"], key)
    assert write_grant is not None
    assert write_grant.role == "write"
    assert load_config(GCS, None) == {}


def test_gcs_tokens_are_refused_when_tampered_or_signed_by_another_key() -> None:
    key = gcs_tokens.signing_key("k1")
    token = gcs_tokens.mint(gcs_tokens.TokenGrant("b", "p", "read", 1), key)
    assert gcs_tokens.verify(token, key) is not None
    assert gcs_tokens.verify(token, gcs_tokens.signing_key("k2")) is None
    body, _, mac = token.removeprefix(gcs_tokens.TOKEN_PREFIX).partition(".")
    forged = gcs_tokens.TOKEN_PREFIX + body[:-2] + "xx." + mac
    assert gcs_tokens.verify(forged, key) is None
    assert gcs_tokens.verify("ya29.real-google-token", key) is None
    assert gcs_tokens.verify(gcs_tokens.TOKEN_PREFIX + "!!.??", key) is None


def test_keyed_credential_repr_hides_the_token() -> None:
    cred = KeyedCredential(config={SAS_KEY: "sig=secret"}, expires_at_ms=1)
    assert "secret" not in repr(cred)
