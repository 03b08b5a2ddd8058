"""Crash points of the Delta, Iceberg and Lance commits (issue 32), on local files.

Why not ``crash_points`` (plain tables) as is: these commits go through delta-rs, Lance (Rust object
stores) and a pyiceberg catalog, not through a boto3 client the fake S3 could stand in for. So
the calls are recorded one level up, where the driver's code meets the store or the catalog:
every log, manifest or catalog read, the one commit call, every listing and delete. A fault-free
run records them; then, for each call N, the job runs again with an error at N (nothing
happened), a lost answer at N (it happened, the caller saw an error) and the driver killed at N
(that call and every later one never happen). The job runs as Spark runs it: planning writes
the job's intent (``engine/job_intent.py``, kept on a fake S3, ADLS or GCS store next to the
local table: ``FORMAT_STORES``, where each format is written), the
tasks land their files (a Lance task renews the job's lease first), then ``commit``, then
``abort`` when a task or the commit raised, nothing after a kill. Delta and Lance jobs commit,
abort and recover through the format's commit protocol (``protocol_for(fmt)``,
``engine/protocol.py``), the one interface the data source drives; Iceberg through its writer.
Then the next write or read recovers the table, once the lease (and the commit call's bound) ran
out.

Invariant, checked by a fresh reader: the table reads (no referenced file was deleted) and
holds exactly the old rows or exactly the new ones; a job that reported success shows the new
rows, one that reported failure the old ones, one that reported an unknown outcome kept every
file; a job that failed (not killed) leaves none of its files unless a version references them.
After the recovery no file of the job is left unreferenced (``orphans``, whatever the job
reported, a killed one included), and a day later no job intent either.
"""

from __future__ import annotations

import itertools
import json
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pyarrow as pa

from lakegate_client.engine import attempts, job_files, jobs, retrying
from lakegate_client.engine.formats import lance as lance_format
from lakegate_client.engine.formats import protocol_for
from lakegate_client.engine.job_intent import JOB_PREFIX, JobIntent, JobTiming, LeaseKeeper
from lakegate_client.engine.protocol import Job, Reported
from lakegate_client.engine.stores.base import S3Location
from lakegate_client.spark.options import SourceOptions
from lakegate_client.tables.directory import new_data_file

from .stores.fake_adls import FakeAdls
from .stores.fake_gcs import FakeGcs
from .stores.fake_s3 import FakeS3, Killed

FORMATS = ("delta", "iceberg", "lance")
# The stores that hold each format's job intent (and Lance's ledger) where the data source
# writes it: Delta on GCS is refused at planning, Iceberg is not served on ADLS or GCS.
FORMAT_STORES = {"delta": ("s3", "adls"), "iceberg": ("s3",), "lance": ("s3", "adls", "gcs")}
CASES = ("append", "overwrite", "create", "refused")
COMMIT_CALLS = ("delta: commit", "catalog: commit", "lance: commit")
KINDS = ("error", "lost", "kill")
SCHEMA = pa.schema([("id", pa.int64())])
OLD = [0, 1]
NEW = [10, 11, 12]
PLAN_LEASE_S = 3_600.0  # the planning heartbeat (a thread) never beats during a run


class Calls:
    """The recorded calls of one run; ``faults`` maps call number N (1-based) to a kind."""

    def __init__(self, faults: dict[int, str] | None = None,
                 error: Callable[[str], BaseException] | None = None,
                 refusal: BaseException | None = None) -> None:
        self.log: list[str] = []
        self.faults = faults or {}
        self.dead = False
        self._error = error or (lambda name: OSError(f"injected 503 at {name}"))
        self._refusal = refusal  # every commit call is refused (a clear 403: never landed)

    def call(self, name: str, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        if self.dead:
            raise Killed(name)
        self.log.append(name)
        kind = self.faults.get(len(self.log))
        if kind == "kill":
            self.dead = True
            raise Killed(name)
        if kind == "error":
            raise self._error(name)
        if self._refusal is not None and name in COMMIT_CALLS:
            raise self._refusal
        result = fn(*args, **kwargs)
        if kind == "lost":
            raise self._error(name)
        return result

    def wrap(self, name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        def wrapped(*args: Any, **kwargs: Any) -> Any:
            return self.call(name, fn, *args, **kwargs)
        return wrapped


@contextmanager
def patched(pairs: list[tuple[Any, str, Any]]) -> Iterator[None]:
    """Set ``obj.attr = value`` for each triple, restoring every one on exit."""
    saved = [(obj, attr, getattr(obj, attr)) for obj, attr, _ in pairs]
    try:
        for obj, attr, value in pairs:
            setattr(obj, attr, value)
        yield
    finally:
        for obj, attr, value in reversed(saved):
            setattr(obj, attr, value)


@dataclass
class Outcome:
    """What one run left: the job's report and the table as a fresh reader sees it."""

    reported: str  # "committed" | "failed" | "unknown" | "killed"
    rows: list[int] | None  # None: the table does not read
    job_files: list[str]  # the job's files still stored
    referenced: set[str]  # files the current version references
    intents: list[str] = field(default_factory=list)  # job intents still stored


@dataclass
class Point:
    n: int
    call: str
    kind: str
    reported: str
    violations: tuple[str, ...]
    orphans: int = 0


@dataclass
class FormatReport:
    scenario: str
    calls: list[str] = field(default_factory=list)
    points: list[Point] = field(default_factory=list)

    @property
    def failed(self) -> list[Point]:
        return [p for p in self.points if p.violations]

    @property
    def kill_orphans(self) -> int:
        return sum(p.orphans for p in self.points)


class FormatScenario:
    """One format and case; every run builds a fresh table under ``root``; ``store``: where the
    job's intent (and Lance's ledger) lives."""

    def __init__(self, fmt: str, case: str, root: Path, store: str = "s3") -> None:
        self.fmt, self.case, self.root, self.store = fmt, case, root, store
        self.name = f"{fmt} {case}" if store == "s3" else f"{fmt} {case} ({store})"
        self._runs = itertools.count()

    @property
    def expected(self) -> list[int]:
        if self.case == "refused":  # the commit never lands: the new rows never show
            return OLD
        return sorted(OLD + NEW) if self.case == "append" else NEW

    @property
    def old(self) -> list[int]:
        return [] if self.case == "create" else OLD

    def run(self, faults: dict[int, str] | None = None
            ) -> tuple[list[str], Outcome, Outcome]:
        """One job: its calls, what it left (``before``) and the table once recovered."""
        where = self.root / f"{self.fmt}-{self.case}-{self.store}-{next(self._runs)}"
        where.mkdir(parents=True)
        world = {"delta": DeltaWorld, "iceberg": IcebergWorld, "lance": LanceWorld}[self.fmt]
        job = world(where, "append" if self.case == "refused" else self.case, self.store)
        calls = Calls(faults, job.error, job.refusal() if self.case == "refused" else None)
        reported = "committed"
        with patched([*job.patches(calls), NO_WAIT]):
            try:
                job.plan()
            except Killed:
                reported = "killed"
            except Exception:  # noqa: BLE001 - the write fails at planning: no task, no abort
                reported = "failed"
            else:
                reported = _run_job(job)
        before = job.outcome(reported)
        job.recover(PLAN_LEASE_S + JobTiming().commit_bound_s + 1)  # the next write or read
        after = job.outcome(reported)
        job.recover(2 * 86_400.0)  # a day later: staged intents with nothing landed too
        after.intents = job.outcome(reported).intents
        return calls.log, Outcome(before.reported, before.rows, before.job_files,
                                  before.referenced, after.intents), after

    def violations(self, out: Outcome, recovered: Outcome) -> tuple[list[str], int]:
        """What breaks the invariant, and how many job files the recovery left unreferenced."""
        wrong: list[str] = []
        if out.rows is None or recovered.rows is None:
            return ["the table does not read (a referenced file was deleted)"], 0
        if out.rows not in (self.old, self.expected):
            wrong.append(f"torn table: {out.rows}")
        if recovered.rows != out.rows:
            wrong.append(f"the recovery changed the rows: {out.rows} -> {recovered.rows}")
        if self.case == "refused" and out.reported == "committed":
            wrong.append("a refused commit reported committed")
        if out.reported == "committed" and out.rows != self.expected:
            wrong.append("reported committed, the new rows are not visible")
        if out.reported == "failed" and out.rows != self.old:
            wrong.append("reported failed, the new rows are visible")
        unreferenced = [f for f in out.job_files if f not in out.referenced]
        if out.reported == "failed" and unreferenced:
            wrong.append(f"a failed job left {len(unreferenced)} files")
        if out.reported == "committed" and out.rows == self.expected and unreferenced:
            wrong.append(f"a committed job left {len(unreferenced)} unused files")
        orphans = [f for f in recovered.job_files if f not in recovered.referenced]
        if orphans:
            wrong.append(f"{len(orphans)} job files unreferenced after the recovery")
        if out.intents:
            wrong.append(f"{len(out.intents)} job intents left a day later")
        return wrong, len(orphans)


def _run_job(job: Any) -> str:
    """Tasks, then ``commit``, then ``abort`` when either raised (as Spark runs them); returns
    what the job reported."""
    try:
        job.tasks()
        job.commit()
    except Killed:
        return "killed"
    except Exception as exc:  # noqa: BLE001 - Spark calls abort when the job failed
        reported = "unknown" if "KEPT" in str(exc) else "failed"
        try:
            job.abort()
        except Killed:  # the driver died before Spark could report anything
            return "killed"
        except Exception:  # noqa: BLE001, S110 - Spark logs an abort's failure
            pass
        return reported
    return "committed"


NO_WAIT = (retrying.time, "sleep", lambda _s: None)  # retries pause for nothing


def enumerate_format(scenario: FormatScenario, kinds: tuple[str, ...] = KINDS) -> FormatReport:
    """Record the calls of a fault-free run, then fail each one in each way."""
    report = FormatReport(scenario.name)
    report.calls, out, recovered = scenario.run()
    wrong, _ = scenario.violations(out, recovered)
    report.points.append(Point(0, "none", "none", out.reported, tuple(wrong)))
    for n, call in enumerate(report.calls, start=1):
        for kind in kinds:
            _, out, recovered = scenario.run({n: kind})
            wrong, orphans = scenario.violations(out, recovered)
            report.points.append(Point(n, call, kind, out.reported, tuple(wrong), orphans))
    return report


def _local_creds(location: Path) -> Any:
    import pyarrow.fs as pafs

    return SimpleNamespace(location=str(location), storage="file",
                           pyarrow_filesystem=pafs.LocalFileSystem, delta_storage_options=dict,
                           lance_storage_options=dict)


def _s3_error(name: str) -> BaseException:
    import botocore.exceptions

    return botocore.exceptions.ClientError(
        {"Error": {"Code": "ServiceUnavailable"}, "ResponseMetadata": {"HTTPStatusCode": 503}},
        name)


def _store_error(name: str) -> BaseException:
    """A 503 as each store's client raises it (by the call's ``<store>:`` prefix)."""
    from lakegate_client.engine.stores.adls import AzureStoreError
    from lakegate_client.engine.stores.gcs import GcsStoreError

    if name.startswith("s3:"):
        return _s3_error(name)
    if name.startswith("adls:"):
        return AzureStoreError(name, 503, "ServerBusy")
    if name.startswith("gcs:"):
        return GcsStoreError(name, 503, "backendError")
    return OSError(f"injected 503 at {name}")


def _tracked_s3(s3: FakeS3, calls: Calls) -> Any:
    """The fake S3 with each call recorded, named by what it touches (a fresh client view per
    process): the job's intent or the Lance attempt ledger."""
    client = SimpleNamespace(exceptions=s3.exceptions)
    for op in ("put_object", "get_object", "delete_object", "delete_objects", "list_objects_v2"):
        def tracked(*args: Any, _op: str = op, **kwargs: Any) -> Any:
            batch = kwargs.get("Delete", {}).get("Objects") or [{}]
            key = str(kwargs.get("Key", kwargs.get("Prefix", batch[0].get("Key", ""))))
            what = "job intent" if JOB_PREFIX in key else "ledger"
            return calls.call(f"s3: {_op} ({what})", getattr(s3, _op), *args, **kwargs)
        setattr(client, op, tracked)
    return client


class _TrackedStore:
    """An ADLS or GCS fake with each call the intent and the ledger make recorded, named by
    store, method and what it touches (the staging calls, unused here, pass through)."""

    def __init__(self, kind: str, store: Any, calls: Calls) -> None:
        self._kind, self._store, self._calls = kind, store, calls

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)

    def _call(self, method: str, key: str, *args: Any) -> Any:
        what = "job intent" if JOB_PREFIX in key else "ledger"
        return self._calls.call(f"{self._kind}: {method} ({what})",
                                getattr(self._store, method), key, *args)

    def put(self, key: str, body: bytes) -> str:
        return str(self._call("put", key, body))

    def put_if(self, key: str, body: bytes, etag: str | None) -> str | None:
        answer = self._call("put_if", key, body, etag)
        return None if answer is None else str(answer)

    def get(self, key: str) -> tuple[bytes, str] | None:
        answer: tuple[bytes, str] | None = self._call("get", key)
        return answer

    def head(self, key: str) -> str | None:
        answer = self._call("head", key)
        return None if answer is None else str(answer)

    def delete(self, key: str) -> None:
        self._call("delete", key)

    def list(self, prefix: str) -> dict[str, str]:
        return dict(self._call("list", prefix))


def _tracked(kind: str, store: Any, calls: Calls) -> Any:
    """The job's store with each call recorded (a fresh client view per process)."""
    return _tracked_s3(store, calls) if kind == "s3" else _TrackedStore(kind, store, calls)


def _on_disk(kind: str, location: Path | None = None) -> Any:
    """A fake store of ``kind`` for the intent and the ledger; with ``location``, on the same
    store as the local table: a delete of a key under ``wh/ds/`` (the ledger's cleanup of
    recorded fragment files) removes the local file too, as one store would."""
    if location is None:
        return {"s3": FakeS3, "adls": FakeAdls, "gcs": FakeGcs}[kind]()
    if kind == "s3":
        return _DatasetS3(location)
    base = FakeAdls if kind == "adls" else FakeGcs

    class OnDisk(base):  # type: ignore[misc, valid-type]
        def delete(self, key: str) -> None:
            super().delete(key)
            (location / key.removeprefix("wh/ds/")).unlink(missing_ok=True)

    return OnDisk()


class JobWorld:
    """What every format's job shares: its intent on a fake store (``engine/job_intent.py``),
    written at planning, and the recovery of the next write or read."""

    fmt = ""
    store = "s3"

    def _jobs_at(self, s3: Any, where: S3Location) -> None:
        self.jobs, self.jobs_where = s3, where
        self.write_id = uuid.uuid4().hex
        self.seen: Any = None  # what planning wrote (``plan``)

    def _job_patches(self, calls: Calls) -> list[tuple[Any, str, Any]]:
        return [(jobs, "job_store", lambda _c: (_tracked(self.store, self.jobs, calls),
                                                     self.jobs_where))]

    @staticmethod
    def error(name: str) -> BaseException:
        return _store_error(name)

    def plan(self) -> None:
        """The driver's planning: write the job's intent (and start its heartbeat thread); what
        it wrote goes to the fence, as the writer's plan carries it."""
        self.seen = jobs.start_job(self.creds, self.fmt, self.write_id, staged=False,
                                   timing=JobTiming(lease_s=PLAN_LEASE_S))

    def intent(self) -> Any:
        return jobs.job_of(self.creds, self.write_id)

    def job(self) -> Job:
        """The job as planning left it, as the format's commit protocol takes it."""
        return Job(fmt=self.fmt, write_id=self.write_id, overwrite=self.case == "overwrite",
                   read_version=getattr(self, "read_version", None), seen=self.seen)

    def commit(self) -> None:
        """The driver's commit, through the format's protocol (``engine/protocol.py``)."""
        protocol_for(self.fmt).commit(self.creds, self.job(), SCHEMA, self.reported())

    def abort(self) -> None:
        """Spark's abort, through the format's protocol."""
        protocol_for(self.fmt).abort(self.creds, self.job(), self.reported())

    def reported(self) -> Reported:
        return Reported()

    def recover(self, after_s: float) -> None:
        """The next write's planning (or a read), ``after_s`` seconds later."""
        timing = JobTiming(now=lambda: time.time() + after_s, sleep=lambda _s: None)
        with patched([(jobs, "job_store", lambda _c: (self.jobs, self.jobs_where)),
                      *self._recovery_patches(), NO_WAIT]):
            self._recover(timing)

    def _recovery_patches(self) -> list[tuple[Any, str, Any]]:
        return []

    def _recover(self, timing: JobTiming) -> None:
        protocol_for(self.fmt).recover(self.creds, timing)

    def _intents(self) -> list[str]:
        return sorted(k for k in self.jobs.objects if JOB_PREFIX in k)

    creds: Any


def _store_patches(calls: Calls, module: Any) -> list[tuple[Any, str, Any]]:
    return [(module, "delete_files", calls.wrap("store: delete", module.delete_files)),
            (module, "list_files", calls.wrap("store: list", module.list_files))]


class DeltaWorld(JobWorld):
    """A Delta table of the old rows (none: create); the job's tasks write two files of new
    rows."""

    fmt = "delta"

    def __init__(self, where: Path, case: str, store: str = "s3") -> None:
        import deltalake

        self.where, self.case, self.store = where, case, store
        self.creds = _local_creds(where)
        self._jobs_at(_on_disk(store), S3Location("b", "wh/t"))
        if case != "create":
            deltalake.write_deltalake(str(where), pa.table({"id": OLD}, schema=SCHEMA))
        self.files: list[Any] = []

    def tasks(self) -> None:
        import pyarrow.parquet as pq

        from lakegate_client.spark.writer import WrittenFile

        for i, ids in enumerate((NEW[:2], NEW[2:])):
            rel = new_data_file(self.write_id, i, "parquet")
            pq.write_table(pa.table({"id": ids}, schema=SCHEMA), self.where / rel)
            self.files.append(WrittenFile(rel, (self.where / rel).stat().st_size, len(ids), 0))

    @staticmethod
    def refusal() -> BaseException:
        return PermissionError("403 Forbidden")

    def patches(self, calls: Calls) -> list[tuple[Any, str, Any]]:
        import deltalake
        import deltalake.transaction as tx

        real = deltalake.DeltaTable

        class Tracked(real):  # type: ignore[misc, valid-type]
            def __init__(self, *args: Any, **kwargs: Any) -> None:
                calls.call("delta: read log", super().__init__, *args, **kwargs)

            @staticmethod
            def is_deltatable(*args: Any, **kwargs: Any) -> bool:
                return bool(calls.call("delta: read log", real.is_deltatable, *args, **kwargs))

            def create_write_transaction(self, *args: Any, **kwargs: Any) -> None:
                calls.call("delta: commit", super().create_write_transaction, *args, **kwargs)

        return [(deltalake, "DeltaTable", Tracked),
                (tx, "create_table_with_add_actions",
                 calls.wrap("delta: commit (create)", tx.create_table_with_add_actions)),
                *_store_patches(calls, job_files), *self._job_patches(calls)]

    def reported(self) -> Reported:
        return Reported(files=self.files)

    def outcome(self, reported: str) -> Outcome:
        import deltalake

        job = sorted(p.name for p in self.where.iterdir() if self.write_id in p.name)
        if not deltalake.DeltaTable.is_deltatable(str(self.where)):
            return Outcome(reported, [], job, set(), self._intents())
        try:
            table = deltalake.DeltaTable(str(self.where))
            rows = sorted(table.to_pyarrow_table().column("id").to_pylist())
            referenced = {u.rsplit("/", 1)[-1] for u in table.file_uris()}
        except Exception:  # noqa: BLE001 - a referenced file is gone (OSError, ArrowInvalid)
            return Outcome(reported, None, job, set(), self._intents())
        return Outcome(reported, rows, job, referenced, self._intents())


class IcebergWorld(JobWorld):
    """An Iceberg table (created at planning, as the writer does) holding the old rows (none:
    create); the job's tasks write one file of new rows."""

    fmt = "iceberg"

    def __init__(self, where: Path, case: str, store: str = "s3") -> None:
        from lakegate_client.spark import iceberg

        from ..spark.iceberg_catalog import MemoryCatalog

        self.case, self.store = case, store
        self.catalog = MemoryCatalog(f"file://{where}/wh")
        table = self.catalog.create_table(("ns", "t"), SCHEMA)
        (where / "wh" / "ns" / "t" / "data").mkdir(parents=True)
        if case != "create":
            table.append(pa.table({"id": OLD}, schema=SCHEMA))
        self.creds = _local_creds(where)
        self._jobs_at(_on_disk(store), S3Location("b", "wh/ns/t"))
        self._patch = [(iceberg, "load_table", lambda _opts: self.catalog.load_table(("ns", "t"))),
                       (iceberg, "node_credentials", lambda *_a, **_k: self.creds),
                       (iceberg.time, "sleep", lambda _s: None)]
        self.opts = SourceOptions(("ns",), "t")
        with patched(self._patch):
            self.writer = iceberg.IcebergWriter(
                self.opts,  # type: ignore[arg-type]
                self.catalog.load_table(("ns", "t")), SCHEMA, case == "overwrite",
                write_id=self.write_id, job=True)
        self.messages: list[Any] = []
        self.data = where / "wh" / "ns" / "t" / "data"

    def tasks(self) -> None:
        batches = pa.table({"id": NEW}, schema=SCHEMA).to_batches()
        self.messages = [self.writer.write(iter(batches))]

    def _recovery_patches(self) -> list[tuple[Any, str, Any]]:
        from lakegate_client.spark import iceberg

        return [*self._patch, (iceberg, "job_store", lambda _c: (self.jobs, self.jobs_where))]

    def _recover(self, timing: JobTiming) -> None:
        from lakegate_client.spark import iceberg

        iceberg.recover_iceberg_jobs(self.opts, self.writer._location,  # type: ignore[arg-type]
                                     reading=False, timing=timing)

    @staticmethod
    def error(name: str) -> BaseException:
        from pyiceberg.exceptions import CommitStateUnknownException

        if name == "catalog: commit":  # what pyiceberg raises on a 500, 502 or 504
            return CommitStateUnknownException(f"injected 504 at {name}")
        return _store_error(name)

    @staticmethod
    def refusal() -> BaseException:
        from pyiceberg.exceptions import ForbiddenError

        return ForbiddenError("403 Forbidden")

    def patches(self, calls: Calls) -> list[tuple[Any, str, Any]]:
        from lakegate_client.spark import iceberg

        catalog = self.catalog
        return [*self._patch,
                (catalog, "commit_table", calls.wrap("catalog: commit", catalog.commit_table)),
                (catalog, "load_table", calls.wrap("catalog: load", catalog.load_table)),
                (iceberg, "list_files", calls.wrap("store: list", iceberg.list_files)),
                (job_files, "delete_files", calls.wrap("store: delete", job_files.delete_files)),
                *self._job_patches(calls)]

    def commit(self) -> None:
        self.writer.commit(self.messages)

    def abort(self) -> None:
        self.writer.abort(self.messages)

    def outcome(self, reported: str) -> Outcome:
        mine = self.writer._write_id
        job = sorted(p.name for p in self.data.iterdir() if p.name.startswith(mine))
        table = self.catalog.load_table(("ns", "t"))
        try:
            rows = sorted(table.scan().to_arrow().column("id").to_pylist())
            referenced = {t.file.file_path.rsplit("/", 1)[-1] for t in table.scan().plan_files()}
        except Exception:  # noqa: BLE001 - a referenced file is gone (OSError, ArrowInvalid)
            return Outcome(reported, None, job, set(), self._intents())
        return Outcome(reported, rows, job, referenced, self._intents())


class _DatasetS3(FakeS3):
    """The fake S3 of the ledger and the intent, on the same store as the local dataset: a
    delete of a key under ``wh/ds/`` (the ledger's cleanup of recorded fragment files) removes
    the local file too, as one store would."""

    def __init__(self, location: Path) -> None:
        super().__init__()
        self._location = location

    def removed(self, key: str) -> None:
        (self._location / key.removeprefix("wh/ds/")).unlink(missing_ok=True)


class _SyncKeeper(LeaseKeeper):
    """A task's first renewal made inline where the task starts, not from the keeper's thread:
    the calls of one run keep one order, so that each is a crash point of its own. A failure
    there is what it is on the thread, a missed renewal (a kill: the process is dead, the task
    cannot tell)."""

    def keep(self, intent: JobIntent, *, committing: bool = False,
             at_once: bool = False) -> int:
        if at_once:
            with suppress(BaseException):
                intent.renew_once()
        return super().keep(intent, committing=committing)


_SYNC_KEEPER = _SyncKeeper()


class LanceWorld(JobWorld):
    """A Lance dataset of the old rows (none: create); the job's tasks write its fragments and
    record them in the attempt ledger, kept on the fake store with the job's intent (as on S3,
    ADLS, GCS: close, create claim, cleanup of the records are store calls of the commit and the
    abort)."""

    fmt = "lance"

    def __init__(self, where: Path, case: str, store: str = "s3") -> None:
        import lance

        self.case, self.store = case, store
        self.location = where / "ds"
        self.creds = _local_creds(self.location)
        if case != "create":
            lance.write_dataset(pa.table({"id": OLD}, schema=SCHEMA), str(self.location))
        self.read_version = lance_format.lance_version(self.creds)
        self.s3, self.where = _on_disk(store, self.location), S3Location("b", "wh/ds")
        self._jobs_at(self.s3, self.where)
        self.fragments: list[str] = []
        self.records: list[str] = []

    def tasks(self) -> None:
        """One task: renew the job's lease, write the fragments, record them in the ledger
        (on the untracked store: an attempt killed between its files and its record is the
        ledger's own documented window, not the driver's)."""
        from lance.fragment import write_fragments

        # the task starts 1 s after planning (no renewal at once; the fence PUTs on planning's
        # ETag), and a create's 10 s after (a renewal at once moves the ETag; the fence reads)
        after_s = 10 if self.case == "create" else 1
        later = JobTiming(now=lambda: time.time() + after_s)
        with jobs.job_lease(jobs.job_of(self.creds, self.write_id, later),
                            keeper=_SYNC_KEEPER, seen=self.seen):
            fragments = write_fragments(pa.table({"id": NEW}, schema=SCHEMA),
                                        str(self.location), schema=SCHEMA)
            self.fragments = [json.dumps(f.to_json()) for f in fragments]
            self.records = [attempts.check_in(self.s3, self.where, self.write_id, 0, 0,
                                              lance_format.lance_files(self.fragments))]

    def _recovery_patches(self) -> list[tuple[Any, str, Any]]:
        return [(lance_format, "lance_ledger", lambda _creds: (self.s3, self.where))]

    @staticmethod
    def refusal() -> BaseException:
        return PermissionError("403 Forbidden")

    def patches(self, calls: Calls) -> list[tuple[Any, str, Any]]:
        import lance

        real_commit, real_read = lance.LanceDataset.commit, lance.LanceDataset.read_transaction
        return [(lance, "dataset", calls.wrap("lance: open", lance.dataset)),
                (lance, "write_dataset", calls.wrap("lance: create", lance.write_dataset)),
                (lance.LanceDataset, "commit", staticmethod(calls.wrap("lance: commit",
                                                                       real_commit))),
                (lance.LanceDataset, "read_transaction",
                 lambda ds, v: calls.call("lance: read transaction", real_read, ds, v)),
                (job_files, "delete_files", calls.wrap("store: delete", job_files.delete_files)),
                (lance_format, "lance_ledger", lambda _creds: (_tracked(self.store, self.s3, calls),
                                                            self.where)),
                *self._job_patches(calls)]

    def reported(self) -> Reported:
        return Reported(fragments=self.fragments, records=self.records)

    def outcome(self, reported: str) -> Outcome:
        import lance

        job = sorted(f for f in lance_format.lance_files(self.fragments)
                     if (self.location / f).exists())
        try:
            dataset = lance.dataset(str(self.location))
        except ValueError:
            return Outcome(reported, [], job, set(), self._intents())
        try:
            rows = sorted(dataset.to_table().column("id").to_pylist())
        except Exception:  # noqa: BLE001 - a referenced file is gone (OSError, ArrowInvalid)
            return Outcome(reported, None, job, set(), self._intents())
        referenced = {f"data/{d.path}" for frag in dataset.get_fragments()
                      for d in frag.metadata.files}
        return Outcome(reported, rows, job, referenced, self._intents())
