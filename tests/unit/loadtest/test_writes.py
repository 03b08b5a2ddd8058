"""The writes scenario's time split (loadtest/scenarios/writes.py) and its report table."""

from __future__ import annotations

import json
import statistics
import threading
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import pytest

from loadtest.report import write_report
from loadtest.scenarios.writes import _median_phases, _StageLog


def _stage(submitted_ms: int, completed_ms: int) -> str:
    return json.dumps({"Event": "SparkListenerStageCompleted",
                       "Stage Info": {"Stage ID": 0, "Submission Time": submitted_ms,
                                      "Completion Time": completed_ms}}) + "\n"


def test_a_write_is_split_into_plan_tasks_and_commit_from_the_event_log(tmp_path: Path) -> None:
    log = tmp_path / "local-1.inprogress"
    log.write_text(json.dumps({"Event": "SparkListenerJobStart"}) + "\n"
                   + _stage(100_000, 100_400)  # the noop job just before the write: not its
                   + _stage(101_500, 103_000))
    stages = _StageLog(tmp_path)
    assert stages.phases(101.0, 103.25) == {"plan": 0.5, "tasks": 1.5, "commit": 0.25}
    assert stages.phases(104.0, 105.0) is None  # no stage ran inside: no split
    with log.open("a") as out:  # read on from where it stopped; a half-written line waits
        out.write(_stage(105_200, 105_900) + '{"Event": "SparkListenerStageCompl')
    assert stages.phases(105.0, 106.0) == {"plan": 0.2, "tasks": 0.7, "commit": 0.1}
    assert len(stages.stages()) == 3


def test_the_phases_of_a_cell_are_the_median_of_its_pairs() -> None:
    samples = [{"plan": 0.2, "tasks": 1.0, "commit": 0.5}, {"plan": 0.4, "tasks": 3.0,
                                                            "commit": 0.1},
               {"plan": 0.3, "tasks": 2.0, "commit": 0.3}]
    assert _median_phases(samples) == {"plan": 0.3, "tasks": 2.0, "commit": 0.3}
    assert _median_phases([]) is None


def test_the_report_shows_ratio_and_where_the_time_goes(tmp_path: Path) -> None:
    ratio = {"median": 1.1, "q1": 1.0, "q3": 1.2, "pairs": 3}
    cell = {"ratio": ratio, "datasource_s": 2.2, "direct_s": 2.0,
            "phases": {"datasource": {"plan": 0.2, "tasks": 1.5, "commit": 0.5},
                       "direct": None}}
    write_report({"meta": {"profile": "standard"},
                  "writes": {"rows": 100_000, "pairs": 3,
                             "lance@200": {"noop_s": 0.3, "append": cell,
                                           "overwrite": dict(cell)}}}, tmp_path)
    md = (tmp_path / "report.md").read_text()
    assert ("| lance | 200 | append | 2.2 | 2.0 | 0.3 | 1.10 [1.00-1.20] (3) | "
            "0.20 / 1.50 / 0.50 | - |") in md


def test_the_direct_overwrite_deletes_the_old_files_concurrently(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The baseline deleted an overwrite's old files one at a time (200 round trips in a row at
    200 partitions) while the data source deletes 8 at a time: a baseline weaker than a careful
    user's. Each delete here waits until a second one is in flight."""
    from loadtest.scenarios import writes

    both = threading.Barrier(2, timeout=5)
    deleted: list[tuple[str, str]] = []

    class _S3:
        def delete_object(self, *, Bucket: str, Key: str) -> None:
            both.wait()
            deleted.append((Bucket, Key))

    monkeypatch.setattr(writes, "s3_client", lambda _creds: _S3())
    creds = SimpleNamespace(location="s3://b/t")
    writes._delete_parquet(creds, ["b/t/part-1.parquet", "b/t/part-2.parquet"])  # type: ignore[arg-type]
    assert sorted(deleted) == [("b", "t/part-1.parquet"), ("b", "t/part-2.parquet")]


def _bench(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
           ds_seconds: Iterator[float] | None = None) -> tuple[object, list[str]]:
    """A write bench whose writes are stubs: each timed write records what it did (the data
    source's take 1.1 s, or ``ds_seconds`` in turn; the direct ones 1.0 s)."""
    from loadtest.profile import STANDARD
    from loadtest.scenarios import writes

    done: list[str] = []

    class _Direct:
        def __init__(self, *_a: object) -> None:
            pass

        def create(self, df: object) -> None:
            done.append(f"direct create ({df})")

        def write(self, _df: object, mode: str) -> float:
            done.append(f"direct {mode}")
            return 1.0

    monkeypatch.setattr(writes, "_Direct", _Direct)
    ctx = SimpleNamespace(profile=STANDARD, stack=SimpleNamespace(
        info=SimpleNamespace(warehouse=SimpleNamespace(name="wh"))))
    bench = writes._WriteBench(ctx, None, None, "ns", "http://gw", _StageLog(tmp_path))  # type: ignore[arg-type]
    rows = {"n": 0}

    def datasource(df: object, _fmt: str, _table: str, mode: str, *,
                   create: bool = False) -> float:
        done.append(f"datasource create ({df})" if create else f"datasource {mode}")
        rows["n"] = rows["n"] + STANDARD.write_rows if mode == "append" else STANDARD.write_rows
        return 1.1 if create or ds_seconds is None else next(ds_seconds)

    monkeypatch.setattr(bench, "frame",
                        lambda _parts: SimpleNamespace(coalesce=lambda n: f"{n} tasks"))
    monkeypatch.setattr(bench, "datasource", datasource)
    monkeypatch.setattr(bench, "noop", lambda _df: 0.1)
    monkeypatch.setattr(bench, "count", lambda _fmt, _table: rows["n"])
    return bench, done


def test_a_cell_runs_its_pairs_within_its_share_of_the_time_budget(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """The 200-partition cells had never run in the standard profile: the scenario now bounds
    its time. A cell runs ``write_pairs`` pairs while its share of the budget lasts, and always
    one."""
    import time

    bench, done = _bench(monkeypatch, tmp_path)
    result = bench.measure("lance", 200, deadline=time.monotonic() + 3600)  # type: ignore[attr-defined]
    # stub writes take no time: the cell runs write_pairs_max, each side writing twice a pair
    # (1.1 s and 1.0 s a write: two reach write_side_s)
    assert done.count("datasource append") == done.count("direct overwrite") == 2 * 9
    assert result["append"]["ratio"]["pairs"] == 9
    assert result["append"]["writes_per_side"] == [2] * 9
    assert result["append"]["ratio"]["median"] == 1.1
    bench, done = _bench(monkeypatch, tmp_path)
    result = bench.measure("lance", 200, deadline=time.monotonic() - 1)  # type: ignore[attr-defined]
    assert done == ["datasource create (2 tasks)", "direct create (2 tasks)",  # untimed
                    "datasource append", "direct append", "direct append", "datasource append",
                    "datasource overwrite", "direct overwrite", "direct overwrite",
                    "datasource overwrite"]
    assert result["overwrite"]["ratio"]["pairs"] == 1


def test_a_quick_cell_runs_more_pairs_while_it_lasts(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Issue 36: a write of a third of a second varies by a third from pair to pair, and three
    pairs put the upper quartile near the worst one; such a cell is cheap to repeat. A cell
    runs ``write_pairs`` pairs, then more up to ``write_pairs_max`` while it has run under
    ``write_cell_s``."""
    import itertools

    from loadtest.profile import STANDARD
    from loadtest.scenarios import writes

    clock = itertools.count(0.0, STANDARD.write_cell_s / 4)  # each pair: a quarter of the cell
    monkeypatch.setattr(writes, "time", SimpleNamespace(monotonic=lambda: next(clock)))
    bench, done = _bench(monkeypatch, tmp_path)
    result = bench.measure("lance", 8, deadline=10**9)  # type: ignore[attr-defined]
    # pairs start at 1/4, 2/4, 3/4 and 4/4 of the cell's time; the fifth would start past it
    assert result["append"]["ratio"]["pairs"] == done.count("datasource append") / 2 == 4
    assert STANDARD.write_pairs < 4 < STANDARD.write_pairs_max


def test_a_pairs_sides_alternate_and_each_counts_by_its_median_write(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Issue 36: a single 0.3 s write per side made a pair's ratio swing 0.73-1.53 for the same
    job. The sides alternate, A B B A ..., until each has written write_side_s (at most
    write_side_max writes), and each side counts by its median write."""
    from loadtest.profile import STANDARD

    bench, done = _bench(monkeypatch, tmp_path, iter([0.3, 2.0] * 100))  # every other stalls
    result = bench.measure("lance", 8, deadline=0)  # type: ignore[attr-defined]
    sides = [d.split()[0] for d in done if d.endswith("append") and "create" not in d]
    assert sides == ["datasource", "direct", "direct", "datasource", "datasource", "direct",
                     "direct", "datasource", "datasource", "direct"][:len(sides)]
    # the direct stub takes 1.0 s a write: two reach 1.5 s, so two turns
    assert result["append"]["writes_per_side"] == [2]
    assert result["append"]["ratio"]["median"] == round(statistics.median([0.3, 2.0]) / 1.0, 3)
    assert STANDARD.write_side_max == 5
    assert STANDARD.write_side_s == 1.5


def test_the_progress_line_gives_each_sides_seconds_and_phases() -> None:
    from loadtest.scenarios.writes import _cell_line

    cell = {"ratio": {"median": 1.1}, "datasource_s": 2.2, "direct_s": 2.0,
            "phases": {"datasource": {"plan": 0.2, "tasks": 1.5, "commit": 0.5},
                       "direct": None}}
    assert _cell_line(cell, "append") == (
        "append ratio 1.1 [datasource 2.2 s (plan 0.2 / tasks 1.5 / commit 0.5), direct 2.0 s]")


def test_the_write_options_narrow_the_cells_and_refuse_what_the_bench_cannot_run() -> None:
    """``--write-formats delta --write-partitions 200 --write-pairs 5`` re-measures one cell
    alone; a typo is refused before a stack starts, never silently measured as nothing."""
    from loadtest.__main__ import write_cells
    from loadtest.profile import QUICK, STANDARD

    one = write_cells(STANDARD, "delta,parquet", "200", 5)
    assert (one.write_formats, one.write_partitions, one.write_pairs, one.write_pairs_max) == (
        ("delta", "parquet"), (200,), 5, 5)  # exactly the pairs asked for
    assert write_cells(STANDARD, "", "", None).write_pairs_max == STANDARD.write_pairs_max
    assert one.write_rows == STANDARD.write_rows
    assert write_cells(QUICK, "", "", None) == QUICK
    for formats, parts, pairs, says in (("deltaa", "", None, "unknown write formats"),
                                        ("", "two", None, "takes integers"),
                                        ("", "0", None, "at least 1"), ("", "", 0, "at least 1")):
        with pytest.raises(ValueError, match=says):
            write_cells(STANDARD, formats, parts, pairs)


def test_the_pairs_alternate_which_side_writes_first() -> None:
    """The first write after the noop job ran measurably slower on the shared machine; with
    the data source always first, every ratio carried that place's cost."""
    from loadtest.scenarios.writes import pair_order

    assert [pair_order(p) for p in range(4)] == [("datasource", "direct"),
                                                 ("direct", "datasource")] * 2


def test_each_sides_store_requests_are_tallied_per_mode_around_its_timed_writes(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Where the data source's extra time goes, by the store's own count: every timed write is
    bracketed by two scrapes, and each side's requests land under its own mode; the untimed
    creates are not counted."""
    from devstack.metrics_scrape import parse
    from loadtest.store_requests import StoreRequests

    bench, done = _bench(monkeypatch, tmp_path)
    puts = {"n": 0}

    def write_then_count(original: object, side_puts: int) -> object:
        def call(*args: object, **kwargs: object) -> float:
            puts["n"] += side_puts  # creates too: a tally that counted them would show it
            return float(original(*args, **kwargs))  # type: ignore[operator]
        return call

    def read(_url: str) -> object:
        return parse('SeaweedFS_s3_request_total{bucket="warehouse",code="200",type="PUT"} '
                     f'{puts["n"]}\n')

    monkeypatch.setattr(bench, "datasource", write_then_count(bench.datasource, 12))  # type: ignore[attr-defined]
    from loadtest.scenarios import writes
    direct_write = writes._Direct.write  # the stub's
    monkeypatch.setattr(writes._Direct, "write",
                        lambda self, df, mode: write_then_count(direct_write, 8)(self, df, mode))
    bench._new_tally = lambda: StoreRequests("http://store", "warehouse", read=read)  # type: ignore[attr-defined]
    result = bench.measure("lance", 8, deadline=0)  # type: ignore[attr-defined]
    for mode in ("append", "overwrite"):
        store = result[mode]["store"]
        assert store["datasource"]["requests"] == {"PUT": 12.0}
        assert store["direct"]["requests"] == {"PUT": 8.0}
        assert store["direct"]["writes"] == result[mode]["writes_per_side"][0] == 2
        assert store["datasource"]["writes"] == 2
    assert done[:2] == ["datasource create (2 tasks)", "direct create (2 tasks)"]


def test_the_report_lists_each_sides_store_requests_per_write(tmp_path: Path) -> None:
    ratio = {"median": 1.2, "q1": 1.1, "q3": 1.3, "pairs": 9}
    store = {"datasource": {"writes": 45, "requests": {"PUT": 17.0, "LIST": 3.0, "POST": 1.0},
                            "server_ms": {"PUT": 30.0, "LIST": 3.5, "POST": 1.5}},
             "direct": {"writes": 45, "requests": {"PUT": 9.0, "GET": 2.5, "Iceberg": 1.0},
                        "server_ms": {"PUT": 15.0, "GET": 2.0, "Iceberg": 0.5}}}
    cell = {"ratio": ratio, "datasource_s": 0.36, "direct_s": 0.3, "store": store}
    write_report({"meta": {"profile": "standard"},
                  "writes": {"rows": 100_000, "pairs": 3,
                             "lance@8": {"noop_s": 0.03, "append": cell}}}, tmp_path)
    md = (tmp_path / "report.md").read_text()
    assert ("| lance | 8 | append | data source | 17 (30.0) | 1 (1.5) | 0 | 0 | 3 (3.5) | 0 | "
            "- | 35.0 | 45 |") in md
    assert ("| lance | 8 | append | direct | 9 (15.0) | 0 | 2.5 (2.0) | 0 | 0 | 0 | "
            "Iceberg 1 | 17.5 | 45 |") in md
    assert "| lance | 8 | overwrite | data source |" not in md  # a mode without a tally
