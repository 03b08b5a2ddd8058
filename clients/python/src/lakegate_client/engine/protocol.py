"""The commit protocol every table format implements, step by step.

A write is one job: planning (the driver, before any task writes) decides what the job is; tasks
*stage* their data where no reader sees it; the driver's commit crosses the format's *point of no
return* (the one call after which the new data is the table: a Delta log entry, a Lance
manifest, an Iceberg snapshot, a plain table's fenced intent) and *rolls forward* whatever is
left (complete, sweep, delete the replaced files); a failed job *aborts*; and a job whose driver
died is *recovered* by the next write or read of the table: rolled forward when its commit
landed, its files removed when it did not.

Each format is one module of :mod:`lakegate_client.engine.formats` with one class implementing
:class:`CommitProtocol` (``formats/plain.py``, ``formats/delta.py``, ``formats/lance.py``;
Iceberg's commit goes through the catalog, ``spark/iceberg.py``); each store is one module of
:mod:`lakegate_client.engine.stores`. The Spark data source, ``read_table``/``write_table`` and
the crash-point enumerations drive only this interface
(:func:`lakegate_client.engine.formats.protocol_for`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    import pyarrow as pa

    from lakegate_client import TableCredentials
    from lakegate_client.engine.job_intent import JobTiming, Seen
    from lakegate_client.engine.stores.base import ObjectStore, PendingUpload

__all__ = ["STEPS", "CommitProtocol", "CommitUnknownError", "Job", "Reported"]

STEPS = ("plan", "stage", "point of no return", "roll forward", "abort", "recover")


class CommitUnknownError(RuntimeError):
    """A commit call failed and the table could not show whether it landed (files kept)."""


@dataclass(frozen=True)
class Job:
    """What planning decided, identical in every task and at the commit.

    ``staged``: tasks stage invisible uploads (plain tables and Delta on S3, ADLS, GCS);
    ``plain``: what a format's planning read for its commit to check against (plain tables:
    their listing, ``formats.plain.PlainPlan``, for the conflict check);
    ``read_version``: the Lance version planning read; ``seen``: the job's intent as planning
    wrote it (``engine/jobs.py``; None: no store with conditional writes).
    """

    fmt: str
    write_id: str
    overwrite: bool
    staged: bool = False
    read_version: int | None = None
    plain: object | None = None
    seen: Seen | None = None


@dataclass(frozen=True)
class Reported:
    """What the task attempts Spark accepted reported: files (``WrittenFile``: staged or
    written), their pending uploads, Lance fragments (JSON) and their attempt-ledger records."""

    files: Sequence[Any] = ()
    uploads: Sequence[PendingUpload] = ()
    fragments: Sequence[str] = ()
    records: Sequence[str] = ()


class CommitProtocol(Protocol):
    """One format's commit (see the module docstring for the steps)."""

    def plan(self, creds: TableCredentials, job: Job, store: ObjectStore | None) -> Job:
        """Planning, before any task writes (``store``: the table's, proven to take
        conditional writes; None elsewhere): recover abandoned jobs, write the job's intent,
        read what the commit checks against. Returns the job as the tasks get it."""
        ...

    def commit(self, creds: TableCredentials, job: Job, schema: pa.Schema, reported: Reported,
               timing: object | None = None) -> None:
        """Publish exactly the reported attempts: cross the point of no return, then roll
        forward (``timing``: the format's own clock and lease, which tests shrink; plain
        tables: ``formats.plain.CommitTiming``). Raises only before the point of no return, or
        :class:`CommitUnknownError` when the outcome cannot be read (files kept)."""
        ...

    def abort(self, creds: TableCredentials, job: Job, reported: Reported) -> None:
        """The job failed: remove what it staged, never a file a version may reference."""
        ...

    def recover(self, creds: TableCredentials, timing: JobTiming | None = None) -> int:
        """A writer's planning (write credential): finish every job of this format whose
        driver died; returns how many. Never raises."""
        ...

    def finish_abandoned(self, creds: TableCredentials,
                         write_creds: Callable[[], TableCredentials]) -> int:
        """A reader's part (read credential): find an abandoned job, and only then ask for a
        write credential and finish it. Never raises."""
        ...

