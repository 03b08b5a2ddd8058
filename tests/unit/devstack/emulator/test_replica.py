"""ReplicaLag: a read answers what the name held `lag_s` ago, and nothing is kept while off."""

from devstack.emulator.replica import ReplicaLag


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_reads_answer_the_state_of_lag_seconds_ago() -> None:
    clock = Clock()
    lag = ReplicaLag(clock)
    lag.set_lag(2.0)
    key = lag.key("generic", "ns-1", "Orders")
    lag.wrote(key, "old")  # dropped at 100 s
    clock.now = 101.0
    lag.wrote(key, None)  # re-created at 101 s: before it, nothing was there
    assert lag.read(key, "new") == "old"  # at 101 s, the replica is at 99 s
    clock.now = 102.5
    assert lag.read(lag.key("generic", "ns-1", "ORDERS"), "new") is None  # at 100.5 s: gone
    clock.now = 103.0
    assert lag.read(key, "new") == "new"  # caught up
    assert lag.read(lag.key("generic", "ns-1", "other"), "x") == "x"


def test_no_history_is_kept_while_the_fault_is_off() -> None:
    clock = Clock()
    lag = ReplicaLag(clock)
    key = lag.key("iceberg", "ns-1", "t")
    lag.wrote(key, "old")
    assert lag.read(key, "new") == "new"
    lag.set_lag(5.0)
    lag.wrote(key, "old")
    lag.set_lag(0.0)  # cleared: a later lag starts from the primary's state
    lag.set_lag(5.0)
    assert lag.read(key, "new") == "new"
