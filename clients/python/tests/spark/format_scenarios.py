"""Crash points of the Delta, Iceberg and Lance commits (issue 32), on local files.

Why not ``tables/crash_points`` as is: these commits go through delta-rs, Lance (Rust object
stores) and a pyiceberg catalog, not through a boto3 client the fake S3 could stand in for. So
the calls are recorded one level up, where the driver's code meets the store or the catalog:
every log, manifest or catalog read, the one commit call, every listing and delete. A fault-free
run records them; then, for each call N, the job runs again with an error at N (nothing
happened), a lost answer at N (it happened, the caller saw an error) and the driver killed at N
(that call and every later one never happen). The job runs as Spark runs it on the driver:
``commit``, then ``abort`` when commit raised, nothing after a kill.

Invariant, checked by a fresh reader: the table reads (no referenced file was deleted) and
holds exactly the old rows or exactly the new ones; a job that reported success shows the new
rows, one that reported failure the old ones, one that reported an unknown outcome kept every
file; a job that failed (not killed) leaves none of its files unless a version references them.
After a kill the job's unreferenced files are counted (``orphans``): on storage where tasks
write visible files nothing but the format's own maintenance (Delta's VACUUM, Iceberg's orphan
file removal, Lance's ``cleanup_old_versions``) finds them.
"""

from __future__ import annotations

import itertools
import json
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pyarrow as pa

from lakegate_client.spark import committer
from lakegate_client.tables import attempts
from lakegate_client.tables.directory import new_data_file
from lakegate_client.tables.staged import S3Location

from ..tables.fake_s3 import FakeS3, Killed

FORMATS = ("delta", "iceberg", "lance")
CASES = ("append", "overwrite", "create", "refused")
COMMIT_CALLS = ("delta: commit", "catalog: commit", "lance: commit")
KINDS = ("error", "lost", "kill")
SCHEMA = pa.schema([("id", pa.int64())])
OLD = [0, 1]
NEW = [10, 11, 12]


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
    """One format and case; every run builds a fresh table under ``root``."""

    def __init__(self, fmt: str, case: str, root: Path) -> None:
        self.fmt, self.case, self.root = fmt, case, root
        self.name = f"{fmt} {case}"
        self._runs = itertools.count()

    @property
    def expected(self) -> list[int]:
        if self.case == "refused":  # the commit never lands: the new rows never show
            return OLD
        return sorted(OLD + NEW) if self.case == "append" else NEW

    @property
    def old(self) -> list[int]:
        return [] if self.case == "create" else OLD

    def run(self, faults: dict[int, str] | None = None) -> tuple[list[str], Outcome]:
        where = self.root / f"{self.fmt}-{self.case}-{next(self._runs)}"
        where.mkdir(parents=True)
        world = {"delta": DeltaWorld, "iceberg": IcebergWorld, "lance": LanceWorld}[self.fmt]
        job = world(where, "append" if self.case == "refused" else self.case)
        calls = Calls(faults, job.error, job.refusal() if self.case == "refused" else None)
        reported = "committed"
        no_wait = (committer.time, "sleep", lambda _s: None)  # retries pause for nothing
        with patched([*job.patches(calls), no_wait]):
            try:
                job.commit()
            except Killed:
                reported = "killed"
            except Exception as exc:  # noqa: BLE001 - Spark calls abort when commit raised
                reported = "unknown" if "KEPT" in str(exc) else "failed"
                try:
                    job.abort()
                except Killed:  # the driver died before Spark could report anything
                    reported = "killed"
                except Exception:  # noqa: BLE001, S110 - Spark logs an abort's failure
                    pass
        return calls.log, job.outcome(reported)

    def violations(self, out: Outcome) -> tuple[list[str], int]:
        """What breaks the invariant, and how many unreferenced job files a kill left."""
        wrong: list[str] = []
        if out.rows is None:
            return ["the table does not read (a referenced file was deleted)"], 0
        if out.rows not in (self.old, self.expected):
            wrong.append(f"torn table: {out.rows}")
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
        return wrong, len(unreferenced) if out.reported == "killed" else 0


def enumerate_format(scenario: FormatScenario, kinds: tuple[str, ...] = KINDS) -> FormatReport:
    """Record the calls of a fault-free run, then fail each one in each way."""
    report = FormatReport(scenario.name)
    report.calls, out = scenario.run()
    wrong, _ = scenario.violations(out)
    report.points.append(Point(0, "none", "none", out.reported, tuple(wrong)))
    for n, call in enumerate(report.calls, start=1):
        for kind in kinds:
            _, out = scenario.run({n: kind})
            wrong, orphans = scenario.violations(out)
            report.points.append(Point(n, call, kind, out.reported, tuple(wrong), orphans))
    return report


def _local_creds(location: Path) -> Any:
    import pyarrow.fs as pafs

    return SimpleNamespace(location=str(location), storage="file",
                           pyarrow_filesystem=pafs.LocalFileSystem, delta_storage_options=dict,
                           lance_storage_options=dict)


def _store_patches(calls: Calls, module: Any) -> list[tuple[Any, str, Any]]:
    return [(module, "delete_files", calls.wrap("store: delete", module.delete_files)),
            (module, "list_files", calls.wrap("store: list", module.list_files))]


class DeltaWorld:
    """A Delta table of the old rows (none: create); the job wrote two files of new rows."""

    def __init__(self, where: Path, case: str) -> None:
        import deltalake
        import pyarrow.parquet as pq

        from lakegate_client.spark.writer import WrittenFile

        self.where, self.case = where, case
        self.creds = _local_creds(where)
        self.write_id = uuid.uuid4().hex
        if case != "create":
            deltalake.write_deltalake(str(where), pa.table({"id": OLD}, schema=SCHEMA))
        self.files = []
        for i, ids in enumerate((NEW[:2], NEW[2:])):
            rel = new_data_file(self.write_id, i, "parquet")
            pq.write_table(pa.table({"id": ids}, schema=SCHEMA), where / rel)
            self.files.append(WrittenFile(rel, (where / rel).stat().st_size, len(ids), 0))

    @staticmethod
    def error(name: str) -> BaseException:
        return OSError(f"injected 503 at {name}")

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
                *_store_patches(calls, committer)]

    def commit(self) -> None:
        committer.publish_delta(self.creds, SCHEMA, self.files, [],
                                overwrite=self.case == "overwrite", write_id=self.write_id)

    def abort(self) -> None:
        committer.discard_delta(self.creds, self.write_id)

    def outcome(self, reported: str) -> Outcome:
        import deltalake

        job = sorted(p.name for p in self.where.iterdir() if self.write_id in p.name)
        if not deltalake.DeltaTable.is_deltatable(str(self.where)):
            return Outcome(reported, [], job, set())
        try:
            table = deltalake.DeltaTable(str(self.where))
            rows = sorted(table.to_pyarrow_table().column("id").to_pylist())
            referenced = {u.rsplit("/", 1)[-1] for u in table.file_uris()}
        except Exception:  # noqa: BLE001 - a referenced file is gone (OSError, ArrowInvalid)
            return Outcome(reported, None, job, set())
        return Outcome(reported, rows, job, referenced)


class IcebergWorld:
    """An Iceberg table (created at planning, as the writer does) holding the old rows (none:
    create); the job's tasks wrote one file of new rows."""

    def __init__(self, where: Path, case: str) -> None:
        from lakegate_client.spark import iceberg

        from .iceberg_catalog import MemoryCatalog

        self.case = case
        self.catalog = MemoryCatalog(f"file://{where}/wh")
        table = self.catalog.create_table(("ns", "t"), SCHEMA)
        (where / "wh" / "ns" / "t" / "data").mkdir(parents=True)
        if case != "create":
            table.append(pa.table({"id": OLD}, schema=SCHEMA))
        self.creds = _local_creds(where)
        self._patch = [(iceberg, "load_table", lambda _opts: self.catalog.load_table(("ns", "t"))),
                       (iceberg, "node_credentials", lambda *_a, **_k: self.creds),
                       (iceberg.time, "sleep", lambda _s: None)]
        with patched(self._patch):
            self.writer = iceberg.IcebergWriter(
                SimpleNamespace(test_fault=""),  # type: ignore[arg-type]
                self.catalog.load_table(("ns", "t")), SCHEMA, case == "overwrite")
            batches = pa.table({"id": NEW}, schema=SCHEMA).to_batches()
            self.messages = [self.writer.write(iter(batches))]
        self.data = where / "wh" / "ns" / "t" / "data"

    @staticmethod
    def error(name: str) -> BaseException:
        from pyiceberg.exceptions import CommitStateUnknownException

        if name == "catalog: commit":  # what pyiceberg raises on a 500, 502 or 504
            return CommitStateUnknownException(f"injected 504 at {name}")
        return OSError(f"injected 503 at {name}")

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
                (committer, "delete_files", calls.wrap("store: delete", committer.delete_files))]

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
            return Outcome(reported, None, job, set())
        return Outcome(reported, rows, job, referenced)


class LanceWorld:
    """A Lance dataset of the old rows (none: create); the job's tasks wrote its fragments and
    recorded them in the attempt ledger, kept on a fake S3 (as on S3: close, create claim,
    cleanup of the records are store calls of the commit and the abort)."""

    def __init__(self, where: Path, case: str) -> None:
        import lance
        from lance.fragment import write_fragments

        self.case = case
        self.location = where / "ds"
        self.creds = _local_creds(self.location)
        self.write_id = uuid.uuid4().hex
        if case != "create":
            lance.write_dataset(pa.table({"id": OLD}, schema=SCHEMA), str(self.location))
        self.read_version = committer.lance_version(self.creds)
        fragments = write_fragments(pa.table({"id": NEW}, schema=SCHEMA), str(self.location),
                                    schema=SCHEMA)
        self.fragments = [json.dumps(f.to_json()) for f in fragments]
        self.s3, self.where = FakeS3(), S3Location("b", "wh/ds")
        self.records = [attempts.check_in(self.s3, self.where, self.write_id, 0, 0,
                                          committer.lance_files(self.fragments))]

    @staticmethod
    def error(name: str) -> BaseException:
        if name.startswith("s3:"):
            import botocore.exceptions

            return botocore.exceptions.ClientError(
                {"Error": {"Code": "ServiceUnavailable"},
                 "ResponseMetadata": {"HTTPStatusCode": 503}}, name)
        return OSError(f"injected 503 at {name}")

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
                (committer, "delete_files", calls.wrap("store: delete", committer.delete_files)),
                (committer, "lance_ledger", lambda _creds: (self._ledger(calls), self.where))]

    def _ledger(self, calls: Calls) -> Any:
        """The fake S3 with each ledger call recorded (a fresh client view per process)."""
        client = SimpleNamespace(exceptions=self.s3.exceptions)
        for op in ("put_object", "get_object", "delete_object", "list_objects_v2"):
            setattr(client, op, calls.wrap(f"s3: {op}", getattr(self.s3, op)))
        return client

    def commit(self) -> None:
        committer.commit_lance(self.creds, SCHEMA, self.fragments,
                               overwrite=self.case == "overwrite",
                               read_version=self.read_version, write_id=self.write_id,
                               records=self.records)

    def abort(self) -> None:
        committer.drop_lance_fragments(self.creds, self.fragments, self.write_id,
                                       since=self.read_version)

    def outcome(self, reported: str) -> Outcome:
        import lance

        job = sorted(f for f in committer.lance_files(self.fragments)
                     if (self.location / f).exists())
        try:
            dataset = lance.dataset(str(self.location))
        except ValueError:
            return Outcome(reported, [], job, set())
        try:
            rows = sorted(dataset.to_table().column("id").to_pylist())
        except Exception:  # noqa: BLE001 - a referenced file is gone (OSError, ArrowInvalid)
            return Outcome(reported, None, job, set())
        referenced = {f"data/{d.path}" for frag in dataset.get_fragments()
                      for d in frag.metadata.files}
        return Outcome(reported, rows, job, referenced)
