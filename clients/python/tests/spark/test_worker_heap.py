"""A reused worker's long-lived heap leaves PySpark's per-task collection
(lakegate_client/spark/worker_heap.py, called by the writers' tasks; issue 36)."""

from __future__ import annotations

import gc
import sys
import types
import uuid
import weakref
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

pa = pytest.importorskip("pyarrow")
pytest.importorskip("pyspark")

from lakegate_client.spark import worker_heap, writer  # noqa: E402

SCHEMA = pa.schema([("id", pa.int64())])


class _Cache:
    """Stands for a worker's long-lived state (a module, a client, a service model)."""


@pytest.fixture(autouse=True)
def _thawed() -> Iterator[None]:
    """Each test starts and ends with nothing frozen in this (pytest's) process."""
    gc.unfreeze()
    worker_heap._freeze.cache_clear()
    yield
    gc.unfreeze()
    worker_heap._freeze.cache_clear()


def _task(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
          freeze_worker_heap: bool = True) -> writer.TaskResult:
    """One Parquet task of the data source, on a local table."""
    import pyarrow.fs as pafs

    creds = SimpleNamespace(location=str(tmp_path), storage="file",
                            pyarrow_filesystem=pafs.LocalFileSystem)
    monkeypatch.setattr(writer, "table_credentials", lambda *_a, **_k: creds)
    opts = SimpleNamespace(freeze_worker_heap=freeze_worker_heap)
    plan = writer.WritePlan(opts=opts,  # type: ignore[arg-type]
                            info=SimpleNamespace(format="parquet",  # type: ignore[arg-type]
                                                 location=str(tmp_path)),
                            overwrite=False, write_id=uuid.uuid4().hex, read_version=None)
    batch = pa.record_batch([pa.array([1, 2])], schema=SCHEMA)
    return writer.LakekeeperWriter(plan, SCHEMA).write(iter([batch]))


def _tracked(obj: Any) -> bool:
    """Whether the cyclic collector still walks ``obj`` (frozen objects are skipped)."""
    return any(o is obj for o in gc.get_objects())


def test_a_task_in_a_reused_worker_takes_the_heap_out_of_the_per_task_collection(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Regression: PySpark's ``gc.collect()`` after every task walked the worker's whole heap
    (pyspark, pyarrow, boto3 and its S3 model: 98,000 objects, 85-240 ms a task on the busy
    bench machine, as long as a 500-row task's write). The task now freezes it."""
    monkeypatch.setenv(worker_heap.REUSE_ENV, "1")
    long_lived = _Cache()
    assert _tracked(long_lived)
    assert _task(tmp_path, monkeypatch).rows == 2
    assert not _tracked(long_lived)
    assert gc.get_freeze_count() > 0
    assert len(list(tmp_path.glob("*.parquet"))) == 1  # and the task wrote its file


def test_nothing_is_frozen_outside_a_reused_worker(tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """A worker that exits after its task (``spark.python.worker.reuse=false``) or a plain
    process calling the writer would pay a full collection for nothing."""
    monkeypatch.delenv(worker_heap.REUSE_ENV, raising=False)
    long_lived = _Cache()
    assert _task(tmp_path, monkeypatch).rows == 2
    assert _tracked(long_lived)
    assert gc.get_freeze_count() == 0


def test_later_tasks_freeze_only_after_an_import_so_their_garbage_is_still_collected(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Freezing after every task would keep each task's objects that were alive at the freeze
    forever when they form a cycle; a freeze follows only a task that imported something."""
    monkeypatch.setenv(worker_heap.REUSE_ENV, "1")
    worker_heap.settle()
    frozen = gc.get_freeze_count()
    cycle = _Cache()
    cycle.self = cycle  # type: ignore[attr-defined]
    gone = weakref.ref(cycle)
    worker_heap.settle()  # the next task: nothing imported, nothing frozen
    # (The count itself may drop: frozen objects are still freed by reference counting.)
    assert gc.get_freeze_count() <= frozen
    assert _tracked(cycle)
    del cycle
    gc.collect()
    assert gone() is None  # a task's cyclic garbage is reclaimed as before
    later = _Cache()
    monkeypatch.setitem(sys.modules, "lakegate_test_another_format",
                        types.ModuleType("lakegate_test_another_format"))
    worker_heap.settle()  # a task that brought another format's library
    assert gc.get_freeze_count() > frozen
    assert not _tracked(later)


def test_the_freeze_worker_heap_option_turns_it_off(tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """A job that would rather keep PySpark's full collection after every task (an object frozen
    alive and later cyclic garbage stays until the worker exits) says
    ``.option("freeze_worker_heap", "false")``."""
    from lakegate_client.spark.options import SourceOptions

    assert SourceOptions.parse({"table": "ns.t"}).freeze_worker_heap is True
    assert SourceOptions.parse({"table": "ns.t",
                                "freeze_worker_heap": "false"}).freeze_worker_heap is False
    monkeypatch.setenv(worker_heap.REUSE_ENV, "1")
    long_lived = _Cache()
    assert _task(tmp_path, monkeypatch, freeze_worker_heap=False).rows == 2
    assert _tracked(long_lived)
    assert gc.get_freeze_count() == 0


def test_a_driver_side_call_freezes_after_it_even_when_it_raises(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Spark runs planning and the commit in reused Python workers of the driver too, whose
    daemon collects after each call: planning's collection ran beside the write's first tasks
    (issue 36). A failed call settles as well: its worker is reused just the same."""
    monkeypatch.setenv(worker_heap.REUSE_ENV, "1")
    long_lived = _Cache()
    with pytest.raises(RuntimeError, match="planning failed"), worker_heap.settling():
        raise RuntimeError("planning failed")
    assert not _tracked(long_lived)
    assert gc.get_freeze_count() > 0


def test_settling_is_off_with_the_option(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(worker_heap.REUSE_ENV, "1")
    long_lived = _Cache()
    with worker_heap.settling(False):
        pass
    assert _tracked(long_lived)
    assert gc.get_freeze_count() == 0


class _Refused(Exception):
    """What the stubbed first step of each driver-side call raises."""


def _refuse(*_a: Any, **_k: Any) -> Any:
    raise _Refused


def _driver_call(call: str, freeze: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """One driver-side call of the data source, its first outside step refused."""
    from lakegate_client import tables
    from lakegate_client.spark import datasource, reader

    options = {"table": "ns.t", "url": "http://127.0.0.1:1",
               "freeze_worker_heap": str(freeze).lower()}
    for module in (datasource, reader, writer):
        monkeypatch.setattr(module, "table_credentials", _refuse)
    monkeypatch.setattr(tables, "describe_table", _refuse)
    monkeypatch.setattr(tables, "ensure_table", _refuse)
    source = datasource.LakekeeperDataSource(options)
    opts = source._opts
    info = SimpleNamespace(format="parquet", location="s3://b/t")
    plan = writer.WritePlan(opts=opts, info=info,  # type: ignore[arg-type]
                            overwrite=False, write_id="w", read_version=None)
    calls = {
        "schema": source.schema,
        "reader": lambda: source.reader(None),  # type: ignore[arg-type]
        "writer": lambda: source.writer(None, False),  # type: ignore[arg-type]
        "partitions": reader.LakekeeperReader(opts, info, None).partitions,  # type: ignore[arg-type]
        "commit": lambda: writer.LakekeeperWriter(plan, SCHEMA).commit([]),
        "abort": lambda: writer.LakekeeperWriter(plan, SCHEMA).abort([]),
    }
    with pytest.raises(_Refused):
        calls[call]()


@pytest.mark.parametrize("call", ["schema", "reader", "writer", "partitions", "commit", "abort"])
def test_every_driver_side_call_of_the_source_settles_its_worker(
        call: str, monkeypatch: pytest.MonkeyPatch) -> None:
    settled: list[bool] = []
    monkeypatch.setattr(worker_heap, "settle", lambda: settled.append(True))
    _driver_call(call, True, monkeypatch)
    assert settled == [True]
    _driver_call(call, False, monkeypatch)
    assert settled == [True]  # .option("freeze_worker_heap", "false"): PySpark's collection
