import os
import signal
import sys
import time

import pytest

from devstack.errors import StartupError
from devstack.processes import (
    ProcessRecord,
    ProcessTable,
    exit_code,
    is_alive,
    respawn,
    sigterm_interrupts,
    spawn,
    stop,
    wait_until,
)

STUBBORN = (
    "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
    "print('up', flush=True); time.sleep(60)"
)


def test_spawned_process_is_recorded_logged_and_stopped(tmp_path):
    rec = spawn(
        "child",
        [sys.executable, "-c", "print('hello', flush=True); import time; time.sleep(60)"],
        log_path=tmp_path / "logs" / "child.log",
        env_extra={"X_EXTRA": "1"},
    )
    try:
        assert is_alive(rec)
        wait_until(
            rec,
            lambda: "hello" in (tmp_path / "logs" / "child.log").read_text(),
            timeout_s=10,
            what="child",
        )
        assert dict(rec.env_extra) == {"X_EXTRA": "1"}
    finally:
        stop(rec)
    assert not is_alive(rec)


def test_process_ignoring_sigterm_is_killed(tmp_path):
    rec = spawn("stubborn", [sys.executable, "-c", STUBBORN], log_path=tmp_path / "s.log")
    wait_until(rec, lambda: "up" in (tmp_path / "s.log").read_text(), timeout_s=10, what="s")
    stop(rec, term_timeout_s=0.3)
    assert not is_alive(rec)


def test_wait_until_reports_an_early_exit_with_the_log_tail(tmp_path):
    rec = spawn(
        "dies",
        [sys.executable, "-c", "print('boom'); raise SystemExit(3)"],
        log_path=tmp_path / "d.log",
    )
    with pytest.raises(StartupError, match="boom"):
        wait_until(rec, lambda: False, timeout_s=10, what="dies")


def test_a_recycled_pid_is_not_taken_for_the_recorded_process(tmp_path):
    rec = spawn(
        "x", [sys.executable, "-c", "import time; time.sleep(60)"], log_path=tmp_path / "x.log"
    )
    try:
        impostor = ProcessRecord(
            name="x", pid=rec.pid, create_time=rec.create_time - 100, log_path=rec.log_path
        )
        assert not is_alive(impostor)
        stop(impostor)  # a no-op: never signals a process it cannot identify
        assert is_alive(rec)
    finally:
        stop(rec)


def test_record_round_trips_and_respawns(tmp_path):
    rec = spawn(
        "r",
        [sys.executable, "-c", "import time; time.sleep(60)"],
        log_path=tmp_path / "r.log",
        env_extra={"A": "b"},
    )
    stop(rec)
    again = respawn(ProcessRecord.from_json("r", rec.to_json()))
    try:
        assert again.pid != rec.pid
        assert again.argv == rec.argv
        assert is_alive(again)
    finally:
        stop(again)


def test_base_env_replaces_the_inherited_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("X_INHERITED", "leaks")
    log = tmp_path / "env.log"
    script = "import os; print(sorted(k for k in os.environ if k.startswith('X_')), flush=True)"
    rec = spawn(
        "env",
        [sys.executable, "-c", script],
        log_path=log,
        base_env={"X_BASE": "1", "PATH": "/usr/bin:/bin"},
        env_extra={"X_EXTRA": "2"},
        cwd=tmp_path,
    )
    for _ in range(200):  # the child prints and exits: poll its log, bounded (10 s)
        if "X_" in log.read_text() or not is_alive(rec):
            break
        time.sleep(0.05)
    assert "['X_BASE', 'X_EXTRA']" in log.read_text()


def test_process_table_stops_everything_it_started_newest_first(tmp_path):
    table = ProcessTable()
    sleeper = [sys.executable, "-c", "import time; time.sleep(60)"]
    first = table.spawn("a", sleeper, log_path=tmp_path / "a.log")
    second = table.spawn("b", [sys.executable, "-c", STUBBORN], log_path=tmp_path / "b.log")
    wait_until(second, lambda: "up" in (tmp_path / "b.log").read_text(), timeout_s=10, what="b")
    table.forget(first.pid)
    table.stop_all(timeout_s=0.3)  # b ignores SIGTERM: killed after the timeout
    assert not is_alive(second)
    assert is_alive(first)  # forgotten: not this table's to stop
    stop(first)


def test_exit_code_of_our_own_child(tmp_path):
    rec = spawn("x", [sys.executable, "-c", "raise SystemExit(7)"], log_path=tmp_path / "x.log")
    assert exit_code(rec.pid, timeout_s=10) == 7


def _terminated_inside(unwound: list[bool]) -> None:
    with sigterm_interrupts():
        try:
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(5)  # the handler raises at the next bytecode; never reached
        finally:
            unwound.append(True)  # a `finally` on the way out runs: it stops what it started


def test_sigterm_interrupts_unwinds_like_ctrl_c_and_restores_the_handler() -> None:
    before = signal.getsignal(signal.SIGTERM)
    unwound: list[bool] = []
    with pytest.raises(KeyboardInterrupt, match="signal 15"):
        _terminated_inside(unwound)
    assert unwound == [True]
    assert signal.getsignal(signal.SIGTERM) is before
