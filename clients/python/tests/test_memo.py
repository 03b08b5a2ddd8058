"""_memo.py: the per-process memo serves only above the floor, is bounded, and forgets tables."""

from __future__ import annotations

import dataclasses

import pytest

from lakegate_client import StorageCredential, TableCredentials, _memo
from lakegate_client._memo import DEFAULT_IDENTITY_TTL_S, CredentialMemo
from lakegate_client._models import TableRef

NOW = 1_800_000_000.0


class FakeClock:
    def __init__(self, now: float) -> None:
        self.t = now

    def now(self) -> float:
        return self.t

    def monotonic(self) -> float:
        return self.t


def snapshot(expires_in_s: float | None, now: float = NOW,
             identity_ttl_s: float | None = 86_400.0) -> TableCredentials:
    """A gateway answer (by default one whose identity is good for longer than its credential,
    so the floor alone decides)."""
    expiry = int((now + expires_in_s) * 1000) if expires_in_s is not None else None
    return TableCredentials.from_parts(
        location="s3://w/t",
        credentials=[StorageCredential("s3://w/t", {"k": "v"})],
        expires_at_ms=expiry,
        identity_ttl_s=identity_ttl_s,
    )


def key(table: str = "t", access: str = "read") -> _memo.MemoKey:
    return _memo.memo_key("http://gw:1", TableRef("wh", ("ns",), table), access)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("expires_in_s", "elapsed_s", "served"),
    [
        (3600, 0, True),
        (3600, 3299, True),
        (3600, 3300, False),
        (3600, 4000, False),
        (301, 0, True),
        (300, 0, False),
        (None, 0, False),
    ],
)
def test_memo_serves_only_above_the_floor(
    expires_in_s: float | None, elapsed_s: float, served: bool
) -> None:
    clock = FakeClock(NOW)
    memo = CredentialMemo(clock, floor_s=300, max_entries=10)
    creds = snapshot(expires_in_s)
    memo.put(key(), creds)
    clock.t += elapsed_s
    assert (memo.get(key()) is creds) is served


def test_memo_drops_an_entry_once_it_falls_below_the_floor() -> None:
    clock = FakeClock(NOW)
    memo = CredentialMemo(clock, floor_s=300, max_entries=10)
    memo.put(key(), snapshot(3600))
    clock.t += 3400
    assert memo.get(key()) is None
    assert len(memo) == 0


def test_memo_keys_are_case_folded_and_separate_access_modes() -> None:
    memo = CredentialMemo(FakeClock(NOW), floor_s=300, max_entries=10)
    creds = snapshot(3600)
    memo.put(key("Orders"), creds)
    assert memo.get(key("ORDERS")) is creds
    assert memo.get(key("orders", "write")) is None


def test_memo_is_a_bounded_lru() -> None:
    memo = CredentialMemo(FakeClock(NOW), floor_s=300, max_entries=3)
    for name in ("a", "b", "c"):
        memo.put(key(name), snapshot(3600))
    assert memo.get(key("a")) is not None  # a is now the most recent
    memo.put(key("d"), snapshot(3600))
    assert len(memo) == 3
    assert memo.get(key("b")) is None
    assert memo.get(key("a")) is not None


def test_forget_table_drops_both_access_modes() -> None:
    memo = CredentialMemo(FakeClock(NOW), floor_s=300, max_entries=10)
    memo.put(key("t", "read"), snapshot(3600))
    memo.put(key("t", "write"), snapshot(3600))
    memo.put(key("other"), snapshot(3600))
    memo.forget_table("http://gw:1", TableRef("wh", ("ns",), "T"))
    assert len(memo) == 1


class SteppingClock(FakeClock):
    """Wall time can step while monotonic time moves only forward."""

    def __init__(self, now: float) -> None:
        super().__init__(now)
        self.wall_offset = 0.0

    def now(self) -> float:
        return self.t + self.wall_offset


def test_wall_clock_steps_neither_expire_nor_extend_a_memoised_credential() -> None:
    clock = SteppingClock(NOW)
    memo = CredentialMemo(clock, floor_s=300, max_entries=10)
    creds = snapshot(3600)
    memo.put(key(), creds)
    clock.wall_offset = 7200.0  # +2 h step: still valid in real time
    assert memo.get(key()) is creds
    clock.wall_offset = -7200.0  # -2 h step, then real time reaches the floor
    clock.t += 3301
    assert memo.get(key()) is None


def test_memo_counts_down_from_the_gateways_remaining_when_it_is_smaller() -> None:
    clock = FakeClock(NOW)
    memo = CredentialMemo(clock, floor_s=300, max_entries=10)
    creds = dataclasses.replace(snapshot(3600), served_remaining_s=600.0)
    memo.put(key(), creds)
    clock.t += 299
    assert memo.get(key()) is creds
    clock.t += 2
    assert memo.get(key()) is None


# -- the table identity: served only while the gateway's word on it holds ----------------------


def test_an_entry_is_served_only_within_the_identity_ttl_the_gateway_stated() -> None:
    clock = FakeClock(NOW)
    memo = CredentialMemo(clock, floor_s=300, max_entries=10)
    creds = snapshot(3600, identity_ttl_s=30.0)
    memo.put(key(), creds)
    clock.t += 29.9
    assert memo.get(key()) is creds
    clock.t += 0.1
    assert memo.get(key()) is None  # ask the gateway again: it may know of a replacement
    assert memo.unconfirmed(key()) is creds  # still there for a gateway that cannot be reached
    clock.t += 3600 - 300 - 30
    assert memo.unconfirmed(key()) is None  # never below the floor, however unreachable


def test_the_identity_ttl_counts_from_when_the_gateway_was_asked() -> None:
    clock = FakeClock(NOW)
    memo = CredentialMemo(clock, floor_s=300, max_entries=10)
    asked = clock.monotonic()
    clock.t += 4  # a slow answer: the gateway's word was given up to 4 s before it arrived
    memo.put(key(), snapshot(3600, now=NOW + 4, identity_ttl_s=10.0), asked_mono=asked)
    clock.t += 5.9
    assert memo.get(key()) is not None
    clock.t += 0.1
    assert memo.get(key()) is None


def test_a_gateway_that_states_no_identity_ttl_gets_a_short_default() -> None:
    clock = FakeClock(NOW)
    memo = CredentialMemo(clock, floor_s=300, max_entries=10)
    memo.put(key(), snapshot(3600, identity_ttl_s=None))
    clock.t += DEFAULT_IDENTITY_TTL_S - 0.01
    assert memo.get(key()) is not None
    clock.t += 0.01
    assert memo.get(key()) is None
    assert DEFAULT_IDENTITY_TTL_S <= 5.0


@pytest.mark.parametrize("stated", [0.0, -1.0])
def test_an_identity_ttl_of_zero_is_never_served_from_the_memo(stated: float) -> None:
    memo = CredentialMemo(FakeClock(NOW), floor_s=300, max_entries=10)
    creds = snapshot(3600, identity_ttl_s=stated)
    memo.put(key(), creds)
    assert memo.get(key()) is None
    assert memo.unconfirmed(key()) is creds
