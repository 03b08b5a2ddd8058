import asyncio
import json

import pytest

from devstack.emulator.errors import ApiError
from devstack.emulator.models import GenericTable, Warehouse
from devstack.emulator.policy import Permission
from devstack.emulator.vending import (
    CredentialVendor,
    TemporaryCredential,
    credential_config,
    load_config,
)

PROFILE = {
    "type": "s3",
    "bucket": "b",
    "region": "us-east-1",
    "endpoint": "http://127.0.0.1:9",
    "path-style-access": True,
    "sts-enabled": True,
    "sts-token-validity-seconds": 3600,
    "sts-role-arn": "arn:aws:iam::role/R",
}


class FakeSts:
    """Records calls; each call returns a distinct credential valid for `duration_s`."""

    def __init__(self, now: list[float], fail: bool = False) -> None:
        self.calls: list[dict] = []
        self._now = now
        self.fail = fail

    def assume_role(self, **kwargs):
        self.calls.append(kwargs)
        if self.fail:
            import botocore.exceptions

            raise botocore.exceptions.ClientError(
                {"Error": {"Code": "Throttling", "Message": "Rate exceeded"}}, "AssumeRole"
            )
        n = len(self.calls)
        return (f"AK{n}", f"SK{n}", f"TOK{n}", self._now[0] + kwargs["duration_s"])


def _warehouse(**profile) -> Warehouse:
    return Warehouse(
        id="w1",
        project_id="p",
        name="demo",
        storage_profile={**PROFILE, **profile},
        storage_credential={"access-key-id": "ak", "secret-access-key": "sk"},
        delete_profile={"type": "hard"},
        status="active",
        protected=False,
    )


def _table(tid: str = "t1") -> GenericTable:
    return GenericTable(
        id=tid,
        warehouse_id="w1",
        namespace_id="n",
        name=tid,
        format="lance",
        base_location=f"s3://b/pre/{tid}",
        doc=None,
        properties={},
        schema=None,
        statistics=None,
        protected=False,
        protected_updated_at_us=None,
        created_at_us=1,
        deleted_at_us=None,
        expiration_at_us=None,
    )


def _vendor(
    sts: FakeSts, clock: list[float], override: list[int | None]
) -> tuple[CredentialVendor, list[int]]:
    counted: list[int] = []
    vendor = CredentialVendor(
        sts,
        on_sts_call=lambda: counted.append(1),
        lifetime_override=lambda: override[0],
        monotonic=lambda: clock[0],
        wall_clock=lambda: clock[0],
    )
    return vendor, counted


async def test_credential_is_reused_for_half_the_validity_then_refetched():
    clock, override = [1000.0], [None]
    sts = FakeSts(clock)
    vendor, counted = _vendor(sts, clock, override)
    first = await vendor.vend(_warehouse(), _table(), Permission.READ_WRITE_DELETE)
    clock[0] += 1799
    assert await vendor.vend(_warehouse(), _table(), Permission.READ_WRITE_DELETE) is first
    clock[0] += 2
    again = await vendor.vend(_warehouse(), _table(), Permission.READ_WRITE_DELETE)
    assert again.access_key_id != first.access_key_id
    assert len(sts.calls) == len(counted) == 2
    assert sts.calls[0]["duration_s"] == 3600
    assert sts.calls[0]["role_arn"] == "arn:aws:iam::role/R"


async def test_permission_level_and_table_are_part_of_the_key():
    clock, override = [0.0], [None]
    sts = FakeSts(clock)
    vendor, _ = _vendor(sts, clock, override)
    await vendor.vend(_warehouse(), _table(), Permission.READ_WRITE_DELETE)
    await vendor.vend(_warehouse(), _table(), Permission.READ)
    await vendor.vend(_warehouse(), _table("t2"), Permission.READ)
    assert len(sts.calls) == 3
    read_policy = json.loads(sts.calls[1]["policy"])
    assert "s3:PutObject" not in read_policy["Statement"][0]["Action"]


async def test_concurrent_misses_share_one_sts_call():
    clock, override = [0.0], [None]
    sts = FakeSts(clock)
    vendor, _ = _vendor(sts, clock, override)
    results = await asyncio.gather(
        *[vendor.vend(_warehouse(), _table(), Permission.READ) for _ in range(50)]
    )
    assert len(sts.calls) == 1
    assert len({id(r) for r in results}) == 1


async def test_short_validity_is_raised_to_the_sts_minimum():
    clock, override = [0.0], [None]
    sts = FakeSts(clock)
    vendor, _ = _vendor(sts, clock, override)
    await vendor.vend(_warehouse(**{"sts-token-validity-seconds": 60}), _table(), Permission.READ)
    assert sts.calls[0]["duration_s"] == 900


async def test_lifetime_override_shortens_advertised_expiry_and_cache_window():
    clock, override = [500.0], [40]
    sts = FakeSts(clock)
    vendor, _ = _vendor(sts, clock, override)
    cred = await vendor.vend(_warehouse(), _table(), Permission.READ)
    assert cred.expires_at_ms == (500 + 40) * 1000
    assert sts.calls[0]["duration_s"] == 3600  # the real credential is still long-lived
    clock[0] += 21
    assert (await vendor.vend(_warehouse(), _table(), Permission.READ)) is not cred


async def test_sts_errors_are_412_and_not_cached():
    clock, override = [0.0], [None]
    sts = FakeSts(clock, fail=True)
    vendor, _ = _vendor(sts, clock, override)
    for _ in range(2):
        with pytest.raises(ApiError) as info:
            await vendor.vend(_warehouse(), _table(), Permission.READ)
        assert (info.value.status, info.value.error_type) == (412, "ShortTermCredentialError")
    assert len(sts.calls) == 2


def test_credential_config_has_lakekeeper_keys_and_string_values():
    cred = TemporaryCredential("AK", "SK", "TOK", 123)
    config = credential_config(PROFILE, cred)
    assert config["s3.endpoint"] == "http://127.0.0.1:9/"
    assert config["s3.path-style-access"] == "true"
    assert config["expiration-time"] == config["s3.session-token-expires-at-ms"] == "123"
    assert all(isinstance(v, str) for v in config.values())
    top = load_config(PROFILE, cred)
    assert top["region"] == "us-east-1"
    assert "expiration-time" not in top
    assert "s3.access-key-id" not in load_config(PROFILE, None)


def test_credential_repr_hides_secrets():
    text = repr(TemporaryCredential("AKID", "very-secret", "session-tok", 1))
    assert "very-secret" not in text
    assert "session-tok" not in text
