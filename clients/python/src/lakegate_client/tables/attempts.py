"""The attempt ledger of a Lance write job on S3 or ADLS (any ``ObjectStore``): what each task
attempt wrote, so that the files of an attempt no commit uses are deleted, also when that attempt
finishes after the job ended.

Why: Lance fragment files land as visible (if unreferenced) objects with names Lance picks. Spark
accepts one attempt per partition; a killed speculative duplicate, or a task still running when
the job aborts, can finish its files after the driver decided, and nobody could find them again
(they stayed until Lance's own ``cleanup_old_versions``). Protocol, under the hidden folder
``_lakegate_attempts/`` of the dataset:

- A task attempt whose fragments are written records their files in
  ``<write_id>/<partition>-<attempt>-<random>.json``, then reads ``closed.json``: if its job is
  listed there (committed or aborted), it deletes its files and its record and fails.
- The driver, at commit and at abort, first adds the job to ``closed.json`` (a conditional PUT,
  entries kept for a day), then reads the job's records and deletes every recorded file its
  commit does not use, and the records (at commit, while the commit call runs: no commit uses
  them; on S3 in one ``DeleteObjects`` where the store takes it).

Either the attempt's record was written before the driver listed (the driver deletes its files)
or the attempt reads ``closed.json`` after the driver closed the job (it deletes them itself).
What stays open: an attempt killed (SIGKILL) between its files landing and its record.

``create.json`` is the claim to create a missing dataset (:func:`claim_create`): Lance's create
is not exclusive (a second create commits as an Overwrite on top of the first, wiping an append
that landed in between), so of several appends that find no dataset only the claim's holder
creates it and the others wait for it.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterable, Sequence
from typing import Any

from lakegate_client.tables.object_store import as_store, delete_all, each
from lakegate_client.tables.staged import S3Location

__all__ = ["CLOSED", "CREATE", "LEDGER", "JobClosedError", "check_in", "claim_create",
           "close_job", "discard_unused", "has_records"]

LEDGER = "_lakegate_attempts"
CLOSED = f"{LEDGER}/closed.json"
KEEP_CLOSED_S = 86_400.0
CLOSE_ATTEMPTS = 20
CREATE = f"{LEDGER}/create.json"
STALE_CREATE_S = 120.0  # a claim this old belongs to a job that died before creating


class JobClosedError(RuntimeError):
    """This task attempt finished after its job committed or aborted (its files are deleted)."""


def _read_closed(s3: Any, where: S3Location) -> tuple[str | None, dict[str, float]]:
    found = as_store(s3, where.bucket).get(where.key(CLOSED))
    if found is None:
        return None, {}
    body = json.loads(found[0] or b"{}")
    jobs = body.get("jobs", {}) if isinstance(body, dict) else {}
    return found[1], {str(k): float(v) for k, v in jobs.items()}


def _delete(s3: Any, where: S3Location, relative: Iterable[str]) -> None:
    """Delete the objects (idempotent): one batch on S3, else several at a time
    (``object_store.delete_all``)."""
    delete_all(as_store(s3, where.bucket), [where.key(rel) for rel in relative])


def check_in(s3: Any, where: S3Location, write_id: str, partition: int, attempt: int,
             files: Sequence[str]) -> str:
    """Record an attempt's ``files`` (relative paths); raise :class:`JobClosedError` (after
    deleting files and record) when the job has already ended. Returns the record (relative
    path), which the attempt reports to the driver."""
    record = f"{LEDGER}/{write_id}/{partition:05d}-{attempt}-{uuid.uuid4().hex[:8]}.json"
    as_store(s3, where.bucket).put(where.key(record), json.dumps({"files": list(files)}).encode())
    if write_id in _read_closed(s3, where)[1]:
        _delete(s3, where, [*files, record])
        raise JobClosedError(f"write {write_id} has already ended; attempt {attempt} of "
                             f"partition {partition} discarded its files")
    return record


def close_job(s3: Any, where: S3Location, write_id: str) -> None:
    """List the job in ``closed.json`` (conditional PUT, retried when another job got there)."""
    for attempt in range(CLOSE_ATTEMPTS):
        etag, jobs = _read_closed(s3, where)
        now = time.time()
        jobs = {w: at for w, at in jobs.items() if now - at < KEEP_CLOSED_S}
        jobs[write_id] = now
        if as_store(s3, where.bucket).put_if(where.key(CLOSED),
                                             json.dumps({"jobs": jobs}).encode(), etag):
            return
        time.sleep(0.02 * (attempt + 1))
    raise RuntimeError(f"could not record the end of write {write_id} in {CLOSED}")


def discard_unused(s3: Any, where: S3Location, write_id: str, used: Iterable[str],
                   reported: Iterable[str] = ()) -> list[str]:
    """Delete every file the job's attempts recorded that is not in ``used``, and the records.
    Call after :func:`close_job`. Returns the deleted files.

    ``reported``: the records of the attempts whose fragments the commit used (all their files
    are in ``used``): not read again, only deleted (one GET per task saved).
    """
    kept, known = set(used), set(reported)
    store = as_store(s3, where.bucket)
    records = [where.relative(key) for key in store.list(f"{where.prefix}/{LEDGER}/{write_id}/")]

    def files_of(record: str) -> list[str]:
        found = store.get(where.key(record))
        if found is None:  # the attempt discarded itself meanwhile
            return []
        return [str(f) for f in json.loads(found[0]).get("files", ())]

    unknown = [r for r in records if r not in known]
    doomed = [f for files in each(files_of, unknown) for f in files if f not in kept]
    _delete(s3, where, [*doomed, *records])
    return doomed


def has_records(s3: Any, where: S3Location, write_id: str) -> bool:
    """Whether any attempt of the job recorded files (one listing of the job's records; ``s3``:
    an :class:`~lakegate_client.tables.object_store.ObjectStore` or a boto3 S3 client)."""
    return bool(as_store(s3, where.bucket).list(f"{where.prefix}/{LEDGER}/{write_id}/"))


def claim_create(s3: Any, where: S3Location, write_id: str) -> bool:
    """Whether this job may create the missing dataset: it put the claim first, holds it
    already, or took over a claim older than ``STALE_CREATE_S`` (both conditional PUTs)."""
    store = as_store(s3, where.bucket)
    body = json.dumps({"write_id": write_id, "at": time.time()}).encode()
    if store.put_if(where.key(CREATE), body, None) is not None:  # refused: 412, AWS's 409
        return True
    found = store.get(where.key(CREATE))
    if found is None:  # AWS's 409: a concurrent claim not yet visible; ask again
        return False
    claim = json.loads(found[0] or b"{}")
    if claim.get("write_id") == write_id:
        return True
    if time.time() - float(claim.get("at", 0)) < STALE_CREATE_S:
        return False
    # AWS: 404 when the claim is gone meanwhile (a refusal too)
    return store.put_if(where.key(CREATE), body, found[1]) is not None
