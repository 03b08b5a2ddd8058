"""A Delta, Iceberg or Lance Spark job whose driver died before its commit leaves no file behind
once the table is read or written again, and a driver whose job was taken over after its lease
expired commits nothing (issue 32 item 6: "no orphan remains once recovery ran";
``engine/job_intent.py``, ``engine/``, ``spark/iceberg.py``, ``spark/reader.py``,
``spark/datasource.py``). Local tables, intents and the Lance ledger on the fake S3."""

from __future__ import annotations

import json
import time
import uuid
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

pa = pytest.importorskip("pyarrow")
deltalake = pytest.importorskip("deltalake")
lance = pytest.importorskip("lance")
pytest.importorskip("pyiceberg")
pytest.importorskip("pyspark")

from lakegate_client.engine import (  # noqa: E402
    attempts,
    jobs,
    stores,
)
from lakegate_client.engine.formats import delta as delta_format  # noqa: E402
from lakegate_client.engine.formats import lance as lance_format  # noqa: E402
from lakegate_client.engine.formats import protocol_for  # noqa: E402
from lakegate_client.engine.job_intent import (  # noqa: E402
    JOB_PREFIX,
    AliveJobs,
    JobFencedError,
    JobIntent,
    JobTiming,
    LeaseKeeper,
    Seen,
)
from lakegate_client.engine.stores.base import S3Location  # noqa: E402
from lakegate_client.spark import iceberg, reader  # noqa: E402
from lakegate_client.spark.options import SourceOptions  # noqa: E402
from lakegate_client.tables.catalog import TableInfo  # noqa: E402

from .formats.test_delta import local_creds, rows, write_file  # noqa: E402
from .stores.fake_s3 import FakeS3  # noqa: E402

SCHEMA = pa.schema([("id", pa.int64())])
WHERE = S3Location("b", "wh/t")
LONG_AGO = JobTiming(now=lambda: time.time() - 3_600)  # the dead driver's last renewal


class StoreS3(FakeS3):
    """Intents and ledger on the fake S3, data on local disk: a delete of a key under the
    table removes the local file too (one store, as on S3)."""

    def __init__(self, location: Path) -> None:
        super().__init__()
        self._location = location

    def removed(self, key: str) -> None:
        (self._location / key.removeprefix(f"{WHERE.prefix}/")).unlink(missing_ok=True)


@pytest.fixture
def store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> StoreS3:
    s3 = StoreS3(tmp_path)
    # raising=False: the regression runs against code without the job intent too
    monkeypatch.setattr(jobs, "job_store", lambda _creds: (s3, WHERE), raising=False)
    monkeypatch.setattr(iceberg, "job_store", lambda _creds: (s3, WHERE), raising=False)
    monkeypatch.setattr(lance_format, "lance_ledger", lambda _creds: (s3, WHERE))
    return s3


def intents(s3: FakeS3) -> list[str]:
    return [k for k in s3.objects if JOB_PREFIX in k]


def lance_creds(location: Path) -> Any:
    creds = local_creds(location)
    creds.lance_storage_options = dict
    return creds


def _read(fmt: str, creds: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """A Spark read's planning of the table (``LakekeeperReader.partitions``)."""
    from pyspark.sql.types import LongType, StructField, StructType

    monkeypatch.setattr(reader, "table_credentials", lambda *_a, **_k: creds)
    info = TableInfo(namespace=("ns",), name="t", format=fmt, location=creds.location)
    opts = SimpleNamespace(freeze_worker_heap=False)
    source = reader.LakekeeperReader(opts, info,  # type: ignore[arg-type]
                                     StructType([StructField("id", LongType())]))
    assert len(source.partitions()) >= 1


def test_a_delta_job_killed_before_its_commit_leaves_no_orphan_after_the_next_read(
        tmp_path: Path, store: StoreS3, monkeypatch: pytest.MonkeyPatch) -> None:
    """Regression: the job's ``part-<write id>-*`` files stayed (unreferenced) until VACUUM."""
    creds = local_creds(tmp_path)
    deltalake.write_deltalake(str(tmp_path), pa.table({"id": [0, 1]}, schema=SCHEMA))
    wid = uuid.uuid4().hex
    JobIntent(store, WHERE, wid, LONG_AGO).create("delta", staged=False)  # planning
    orphan = write_file(tmp_path, wid, [10, 11])  # a task; then the driver dies
    assert (tmp_path / orphan.path).exists()

    _read("delta", creds, monkeypatch)

    assert not (tmp_path / orphan.path).exists()
    assert intents(store) == []
    assert rows(tmp_path) == [0, 1]


def _lance_job_with_fragments(tmp_path: Path, store: StoreS3) -> tuple[Any, str, list[str]]:
    """A Lance table of two rows and a job (intent from long ago) whose task wrote two rows of
    fragments, not yet recorded: its credentials, write id and fragments."""
    from lance.fragment import write_fragments

    creds = lance_creds(tmp_path)
    lance.write_dataset(pa.table({"id": [0, 1]}, schema=SCHEMA), str(tmp_path))
    wid = uuid.uuid4().hex
    JobIntent(store, WHERE, wid, LONG_AGO).create("lance", staged=False, read_version=1)
    fragments = [json.dumps(f.to_json()) for f in write_fragments(
        pa.table({"id": [10, 11]}, schema=SCHEMA), str(tmp_path), schema=SCHEMA)]
    return creds, wid, fragments


def test_a_lance_job_killed_before_its_commit_leaves_no_orphan_after_the_next_read(
        tmp_path: Path, store: StoreS3, monkeypatch: pytest.MonkeyPatch) -> None:
    creds, wid, fragments = _lance_job_with_fragments(tmp_path, store)
    files = lance_format.lance_files(fragments)
    attempts.check_in(store, WHERE, wid, 0, 0, files)  # the task; then the driver dies
    assert all((tmp_path / f).exists() for f in files)

    _read("lance", creds, monkeypatch)

    assert not any((tmp_path / f).exists() for f in files)
    assert intents(store) == []
    assert sorted(lance.dataset(str(tmp_path)).to_table().column("id").to_pylist()) == [0, 1]


def test_a_lance_job_killed_after_its_commit_is_rolled_forward_by_the_next_read(
        tmp_path: Path, store: StoreS3, monkeypatch: pytest.MonkeyPatch) -> None:
    """The driver dies between its commit and the ledger's cleanup: a duplicate attempt's files
    (recorded, never reported) were left for good. Recovery now finishes that cleanup."""
    from lance.fragment import write_fragments

    creds, wid, fragments = _lance_job_with_fragments(tmp_path, store)
    used = lance_format.lance_files(fragments)
    duplicate = lance_format.lance_files([json.dumps(f.to_json()) for f in write_fragments(
        pa.table({"id": [10, 11]}, schema=SCHEMA), str(tmp_path), schema=SCHEMA)])
    attempts.check_in(store, WHERE, wid, 0, 0, used)
    attempts.check_in(store, WHERE, wid, 0, 1, duplicate)  # the killed speculative copy
    intent = JobIntent(store, WHERE, wid, LONG_AGO)
    intent.fence(files=used)
    lance_format._commit_lance(creds, SCHEMA, fragments, overwrite=False, read_version=1,
                               ledger=(store, WHERE), write_id=wid)  # then the driver dies

    _read("lance", creds, monkeypatch)

    assert all((tmp_path / f).exists() for f in used)
    assert not any((tmp_path / f).exists() for f in duplicate)
    assert intents(store) == []
    assert not [k for k in store.objects if f"/{wid}/" in k]  # the ledger's records too
    assert sorted(lance.dataset(str(tmp_path)).to_table().column("id").to_pylist()) == [
        0, 1, 10, 11]


def test_an_iceberg_job_killed_before_its_commit_leaves_no_orphan_after_the_next_read(
        tmp_path: Path, store: StoreS3, monkeypatch: pytest.MonkeyPatch) -> None:
    from lakegate_client.spark import datasource

    from ..spark.iceberg_catalog import MemoryCatalog

    catalog = MemoryCatalog(f"file://{tmp_path}/wh")
    catalog.create_table(("ns", "t"), SCHEMA).append(pa.table({"id": [0, 1]}, schema=SCHEMA))
    table = catalog.load_table(("ns", "t"))
    data = tmp_path / "wh" / "ns" / "t" / "data"
    creds = local_creds(tmp_path)
    monkeypatch.setattr(iceberg, "load_table", lambda _opts: catalog.load_table(("ns", "t")))
    monkeypatch.setattr(iceberg, "node_credentials", lambda *_a, **_k: creds)
    wid = uuid.uuid4().hex
    JobIntent(store, WHERE, wid, LONG_AGO).create("iceberg", staged=False)
    job = iceberg.IcebergWriter(SourceOptions(("ns",), "t"),  # type: ignore[arg-type]
                                table, SCHEMA, False, write_id=wid, job=True)
    job.write(iter(pa.table({"id": [10, 11]}, schema=SCHEMA).to_batches()))  # then it dies
    assert [p for p in data.iterdir() if p.name.startswith(wid)]

    source = datasource.LakekeeperDataSource({"table": "ns.t", "format": "iceberg",
                                              "catalog_url": "http://127.0.0.1:1",
                                              "warehouse": "w"})
    source.reader(iceberg.spark_schema_of(table))

    assert not [p for p in data.iterdir() if p.name.startswith(wid)]
    assert intents(store) == []
    assert sorted(catalog.load_table(("ns", "t")).scan().to_arrow()
                  .column("id").to_pylist()) == [0, 1]


def test_a_stale_delta_driver_cannot_commit_after_a_takeover(
        tmp_path: Path, store: StoreS3) -> None:
    """The driver stalled past its lease; the next writer took the job over and removed its
    files. When it wakes, its commit refuses (nothing visible) instead of committing files that
    are gone (a table whose reads fail)."""
    creds = local_creds(tmp_path)
    deltalake.write_deltalake(str(tmp_path), pa.table({"id": [0, 1]}, schema=SCHEMA))
    wid = uuid.uuid4().hex
    JobIntent(store, WHERE, wid, LONG_AGO).create("delta", staged=False)
    written = write_file(tmp_path, wid, [10, 11])
    assert protocol_for("delta").recover(creds) == 1  # the next write's planning

    with pytest.raises(JobFencedError, match="took it over"):
        delta_format.publish_delta(creds, SCHEMA, [written], [], overwrite=False, write_id=wid,
                                   intent=jobs.job_of(creds, wid))

    assert rows(tmp_path) == [0, 1]
    assert delta_format.delta_committed(creds, wid) is False
    assert not (tmp_path / written.path).exists()


def test_a_stale_lance_driver_cannot_commit_after_a_takeover(
        tmp_path: Path, store: StoreS3) -> None:
    creds, wid, fragments = _lance_job_with_fragments(tmp_path, store)
    attempts.check_in(store, WHERE, wid, 0, 0, lance_format.lance_files(fragments))
    assert protocol_for("lance").recover(creds) == 1

    with pytest.raises(JobFencedError):
        lance_format.commit_lance(creds, SCHEMA, fragments, overwrite=False, read_version=1,
                                  write_id=wid, intent=jobs.job_of(creds, wid))

    dataset = lance.dataset(str(tmp_path))
    assert dataset.version == 1
    assert sorted(dataset.to_table().column("id").to_pylist()) == [0, 1]


def test_a_live_job_is_not_touched_by_a_read(
        tmp_path: Path, store: StoreS3, monkeypatch: pytest.MonkeyPatch) -> None:
    creds = local_creds(tmp_path)
    deltalake.write_deltalake(str(tmp_path), pa.table({"id": [0, 1]}, schema=SCHEMA))
    wid = uuid.uuid4().hex
    JobIntent(store, WHERE, wid).create("delta", staged=False)  # its lease is fresh
    written = write_file(tmp_path, wid, [10, 11])

    _read("delta", creds, monkeypatch)

    assert (tmp_path / written.path).exists()
    assert len(intents(store)) == 1
    delta_format.publish_delta(creds, SCHEMA, [written], [], overwrite=False, write_id=wid,
                               intent=jobs.job_of(creds, wid))
    assert rows(tmp_path) == [0, 1, 10, 11]
    assert intents(store) == []


def test_a_reader_without_write_access_reads_on_with_a_warning(
        tmp_path: Path, store: StoreS3, caplog: pytest.LogCaptureFixture) -> None:
    creds = local_creds(tmp_path)
    deltalake.write_deltalake(str(tmp_path), pa.table({"id": [0, 1]}, schema=SCHEMA))
    wid = uuid.uuid4().hex
    JobIntent(store, WHERE, wid, LONG_AGO).create("delta", staged=False)
    orphan = write_file(tmp_path, wid, [10, 11])

    def refused() -> Any:
        raise PermissionError("403: this caller may only read")

    assert protocol_for("delta").finish_abandoned(creds, refused) == 0

    assert "a write credential is needed" in caplog.text
    assert (tmp_path / orphan.path).exists()  # left for a caller who may write
    assert len(intents(store)) == 1
    assert rows(tmp_path) == [0, 1]


# ------------------------------------------------------- the intent on ADLS and GCS (not patched)
def _on_disk(store_class: type[Any]) -> type[Any]:
    """A fake ADLS or GCS store holding the job's intent and the Lance ledger, whose deletes of a
    key under a local table remove the local file too (one store, as on ADLS or GCS)."""

    class OnDisk(store_class):  # type: ignore[misc, valid-type]
        def delete(self, key: str) -> None:
            super().delete(key)
            Path(f"/{key}").unlink(missing_ok=True)

    return OnDisk


def _cloud(storage: str, fmt: str, tmp_path: Path,
           monkeypatch: pytest.MonkeyPatch) -> tuple[Any, Any]:
    """A local table whose credential says ``storage``: ``job_store`` (not patched) finds its
    intents on the table's store, here the fake of that store."""
    from .stores.fake_adls import FakeAdls
    from .stores.fake_gcs import FakeGcs

    creds = lance_creds(tmp_path) if fmt == "lance" else local_creds(tmp_path)
    creds.storage = storage
    cloud = _on_disk(FakeAdls if storage == "adls" else FakeGcs)()
    monkeypatch.setattr(stores, "table_store", lambda _creds: cloud)
    return creds, cloud


@pytest.mark.parametrize(("storage", "fmt"), [("adls", "delta"), ("adls", "lance"),
                                              ("gcs", "lance"), ("adls", "iceberg")])
def test_a_job_killed_before_its_commit_on_adls_or_gcs_leaves_no_orphan_after_recovery(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, storage: str, fmt: str) -> None:
    """Regression: the intent existed on S3 only, so on ADLS and GCS a driver killed before its
    Delta, Lance or Iceberg commit left its written files for good. Planning's intent, the
    task's files, then the next write's planning (Delta, Lance) or read (Iceberg)."""
    creds, cloud = _cloud(storage, fmt, tmp_path, monkeypatch)
    wid = uuid.uuid4().hex
    if fmt == "delta":
        deltalake.write_deltalake(str(tmp_path), pa.table({"id": [0, 1]}, schema=SCHEMA))
        intent = jobs.job_of(creds, wid, LONG_AGO)
        assert intent is not None  # None: no intent on this store
        intent.create("delta", staged=False)
        left = [tmp_path / write_file(tmp_path, wid, [10, 11]).path]
    elif fmt == "lance":
        from lance.fragment import write_fragments

        lance.write_dataset(pa.table({"id": [0, 1]}, schema=SCHEMA), str(tmp_path))
        intent = jobs.job_of(creds, wid, LONG_AGO)
        assert intent is not None
        intent.create("lance", staged=False, read_version=1)
        fragments = [json.dumps(f.to_json()) for f in write_fragments(
            pa.table({"id": [10, 11]}, schema=SCHEMA), str(tmp_path), schema=SCHEMA)]
        files = lance_format.lance_files(fragments)
        attempts.check_in(cloud, S3Location.parse(str(tmp_path)), wid, 0, 0, files)
        left = [tmp_path / f for f in files]
    else:
        left = _iceberg_job(tmp_path, creds, wid, monkeypatch)
    assert left
    assert all(p.exists() for p in left)

    if fmt == "iceberg":
        assert iceberg.recover_iceberg_jobs(SimpleNamespace(),  # type: ignore[arg-type]
                                            str(tmp_path / "wh" / "ns" / "t"),
                                            reading=True) == 1
    else:
        assert protocol_for(fmt).recover(creds) == 1  # the next write's planning

    assert not any(p.exists() for p in left)
    assert [k for k in cloud.objects if JOB_PREFIX in k] == []


def _iceberg_job(tmp_path: Path, creds: Any, wid: str,
                 monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    """An Iceberg table of two rows and a job (its intent from long ago) whose task wrote its
    data file; returns the file."""
    from ..spark.iceberg_catalog import MemoryCatalog

    catalog = MemoryCatalog(f"file://{tmp_path}/wh")
    catalog.create_table(("ns", "t"), SCHEMA).append(pa.table({"id": [0, 1]}, schema=SCHEMA))
    table = catalog.load_table(("ns", "t"))
    monkeypatch.setattr(iceberg, "load_table", lambda _opts: catalog.load_table(("ns", "t")))
    monkeypatch.setattr(iceberg, "node_credentials", lambda *_a, **_k: creds)
    intent = jobs.job_of(creds, wid, LONG_AGO)
    assert intent is not None
    intent.create("iceberg", staged=False)
    job = iceberg.IcebergWriter(SourceOptions(("ns",), "t"),  # type: ignore[arg-type]
                                table, SCHEMA, False, write_id=wid, job=True)
    job.write(iter(pa.table({"id": [10, 11]}, schema=SCHEMA).to_batches()))  # then it dies
    data = tmp_path / "wh" / "ns" / "t" / "data"
    return [p for p in data.iterdir() if p.name.startswith(wid)]


def test_a_stale_driver_on_adls_cannot_commit_after_a_takeover(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Fencing on ADLS: the takeover is a Put Blob conditional on the ETag the recoverer read,
    so the stalled owner's fence (If-Match on its older ETag) fails and nothing is committed."""
    creds, _cloud_store = _cloud("adls", "delta", tmp_path, monkeypatch)
    deltalake.write_deltalake(str(tmp_path), pa.table({"id": [0, 1]}, schema=SCHEMA))
    wid = uuid.uuid4().hex
    intent = jobs.job_of(creds, wid, LONG_AGO)
    assert intent is not None
    intent.create("delta", staged=False)
    written = write_file(tmp_path, wid, [10, 11])
    assert protocol_for("delta").recover(creds) == 1

    with pytest.raises(JobFencedError, match="took it over"):
        delta_format.publish_delta(creds, SCHEMA, [written], [], overwrite=False, write_id=wid,
                                   intent=jobs.job_of(creds, wid))
    assert rows(tmp_path) == [0, 1]
    assert delta_format.delta_committed(creds, wid) is False


def test_a_tasks_lease_is_renewed_at_once_beside_it_and_a_workers_next_task_skips_that(
        ) -> None:
    """Spark runs task after task in one Python worker. The first task's hold renews its job's
    lease at once, from the keeper's thread: the task never waits for that read (issue 36;
    here the store answers only once the body runs, which a read made before the body would
    wait for in vain). The next task within two seconds asks for no renewal; later ones do."""
    import threading

    s3, monotonic = FakeS3(), [0.0]
    alive, keeper = AliveJobs(clock=lambda: monotonic[0]), LeaseKeeper()
    wid = uuid.uuid4().hex
    JobIntent(s3, WHERE, wid).create("lance", staged=False)
    writing = threading.Event()

    class Beside(FakeS3):
        def get_object(self, **kw: str) -> dict[str, object]:
            if not writing.wait(5):
                raise TimeoutError("the renewal ran before the task's write")
            return s3.get_object(**kw)

    def reads() -> int:
        return sum(1 for op, key in s3.calls if op == "GetObject" and JOB_PREFIX in key)

    with jobs.job_lease(JobIntent(Beside(), WHERE, wid), alive, keeper):
        writing.set()
        deadline = time.monotonic() + 5
        while reads() < 1:
            assert time.monotonic() < deadline, "no renewal at once"
            time.sleep(0.002)
    monotonic[0] += 1.5
    with jobs.job_lease(JobIntent(s3, WHERE, wid), alive, keeper):
        time.sleep(0.05)
    assert reads() == 1  # the same worker, moments later: no second read
    monotonic[0] += 1.0
    with jobs.job_lease(JobIntent(s3, WHERE, wid), alive, keeper):
        deadline = time.monotonic() + 5
        while reads() < 2:
            assert time.monotonic() < deadline, "no renewal after two seconds"
            time.sleep(0.002)




def test_a_task_of_a_job_planned_moments_ago_asks_for_no_renewal_at_once() -> None:
    """Issue 36: planning's intent, younger than an eighth of the lease, is as fresh as a
    renewal would leave it (a renewal would only read it): the task's hold asks for none at
    once. An older plan (planning's process may be gone) gets its renewal at once, as before;
    so does a task without planning's view."""
    s3, wall = FakeS3(), [1_000.0]
    timing = JobTiming(now=lambda: wall[0])
    alive, keeper = AliveJobs(clock=lambda: 0.0), LeaseKeeper()

    def reads() -> int:
        return sum(1 for op, key in s3.calls if op == "GetObject" and JOB_PREFIX in key)

    def task(wid: str, seen: Seen | None) -> int:
        before = reads()
        with jobs.job_lease(JobIntent(s3, WHERE, wid, timing), alive, keeper, seen):
            time.sleep(0.1)
        return reads() - before

    fresh = JobIntent(s3, WHERE, "fresh", timing).create("lance", staged=False)
    wall[0] += 5  # 5 s after planning: fresher than 60 s / 8
    assert task("fresh", fresh) == 0
    old = JobIntent(s3, WHERE, "old", timing).create("lance", staged=False)
    wall[0] += 8
    assert task("old", old) == 1
    JobIntent(s3, WHERE, "unseen", timing).create("lance", staged=False)
    assert task("unseen", None) == 1
