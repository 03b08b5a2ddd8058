"""The test-only fault hook is refused unless enabled, and fires exactly where it says."""

from __future__ import annotations

import pytest

from lakegate_client.spark.faults import ENABLE_ENV, Faults, InjectedFault
from lakegate_client.spark.options import OptionsError, SourceOptions


def test_the_option_is_refused_unless_the_environment_enables_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv(ENABLE_ENV, raising=False)
    with pytest.raises(OptionsError, match="test-only"):
        SourceOptions.parse({"table": "ns.t", "test_fault": "after_land@0"})
    assert SourceOptions.parse({"table": "ns.t"}).test_fault == ""


def test_rules_fire_on_their_partition_stage_and_attempt(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ENABLE_ENV, "1")
    faults = Faults.parse("after_land@1#once,before_land@2,before_commit@0")
    faults.hit("after_land", 0, 0)
    with pytest.raises(InjectedFault, match="after_land@1"):
        faults.hit("after_land", 1, 0)
    faults.hit("after_land", 1, 1)  # once: the retry succeeds
    with pytest.raises(InjectedFault):
        list(faults.midway(iter([1, 2, 3]), 2, 5))
    assert list(faults.midway(iter([1, 2]), 0, 0)) == [1, 2]
    with pytest.raises(InjectedFault, match="before_commit"):
        faults.hit("before_commit", 0)


@pytest.mark.parametrize("spec", ["nowhere@1", "after_land", "after_land@1#twice", "slow@x=1"])
def test_bad_rules_name_the_problem(monkeypatch: pytest.MonkeyPatch, spec: str) -> None:
    monkeypatch.setenv(ENABLE_ENV, "1")
    with pytest.raises(ValueError, match=r"test_fault|invalid literal|could not convert"):
        Faults.parse(spec)


def test_a_slow_rule_with_once_slows_only_the_first_attempt(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """What the write matrix's speculation case needs: attempt 0 lags, a speculative copy not."""
    monkeypatch.setenv(ENABLE_ENV, "1")
    slept: list[float] = []
    monkeypatch.setattr("lakegate_client.spark.faults.time.sleep", slept.append)
    faults = Faults.parse("slow@0=7#once,slow@1=3")
    assert list(faults.midway(iter([1, 2]), 0, 1)) == [1, 2]
    assert slept == []
    list(faults.midway(iter([1]), 0, 0))
    list(faults.midway(iter([1]), 1, 2))
    assert slept == [7.0, 3.0]
    with pytest.raises(ValueError, match="test_fault flag"):
        Faults.parse("commit_at@0=5#once")


def test_a_slow_commit_sleeps_after_the_point_of_no_return_on_its_lease(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """What the write matrix's slow_commit case needs: a plain commit outliving its lease."""
    monkeypatch.setenv(ENABLE_ENV, "1")
    slept: list[float] = []
    monkeypatch.setattr("lakegate_client.spark.faults.time.sleep", slept.append)
    faults = Faults.parse("lease@0=2,slow_commit@0=8")
    assert faults.lease_s() == 2.0
    assert Faults.parse("").lease_s() is None
    faults.hit("before_commit", 0)
    faults.hit("input_done", 0)
    assert slept == []
    faults.hit("point_of_no_return", 0)
    assert slept == [8.0]
    with pytest.raises(ValueError, match="test_fault flag"):
        Faults.parse("lease@0=2#once")
