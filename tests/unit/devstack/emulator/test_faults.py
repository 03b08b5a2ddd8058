import random

from devstack.emulator.faults import Faults, FaultSpec


def test_count_fails_exactly_the_next_n_matching_calls():
    faults = Faults()
    faults.set(FaultSpec(status=503, count=2, operations=["load_generic_table"]))
    assert not faults.decide("list_generic_tables").fails
    decisions = [faults.decide("load_generic_table") for _ in range(4)]
    assert [d.status for d in decisions] == [503, 503, None, None]


def test_probability_uses_the_injected_rng():
    faults = Faults(rng=random.Random(7))  # noqa: S311
    faults.set(FaultSpec(status=500, probability=0.5))
    fired = sum(faults.decide("config").fails for _ in range(1000))
    assert 400 < fired < 600


def test_status_alone_fails_every_call_with_retry_after():
    faults = Faults()
    faults.set(FaultSpec(status=429, retry_after=3))
    decision = faults.decide("anything")
    assert (decision.status, decision.retry_after) == (429, 3)


def test_drop_connection_and_clear():
    faults = Faults()
    faults.set(FaultSpec(drop_connection=True, count=1))
    assert faults.decide("x").drop
    assert not faults.decide("x").fails
    faults.set(FaultSpec(latency_ms=10, credential_lifetime_s=60))
    assert faults.decide("x").latency_s == 0.01
    assert faults.credential_lifetime_s == 60
    faults.set(FaultSpec(clear=True))
    assert faults.credential_lifetime_s is None
    assert faults.decide("x").latency_s == 0


def test_sts_faults_apply_only_when_sts_is_named():
    faults = Faults()
    faults.set(FaultSpec(status=503, count=1))
    assert not faults.decide_sts().fails
    faults.set(FaultSpec(status=503, count=1, operations=["sts_assume_role"]))
    assert not faults.decide("load_generic_table").fails
    assert faults.decide_sts().fails
    assert not faults.decide_sts().fails
