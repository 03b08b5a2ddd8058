"""The attempt ledger of a Lance write job on S3, ADLS or GCS (any ``ObjectStore``): what each
task attempt wrote, so that the files of an attempt no commit uses are deleted, also when that
attempt finishes after the job ended.

Why: Lance fragment files land as visible (if unreferenced) objects with names Lance picks. Spark
accepts one attempt per partition; a killed speculative duplicate, or a task still running when
the job aborts, can finish its files after the driver decided, and nobody could find them again
(they stayed until Lance's own ``cleanup_old_versions``). Protocol, under the hidden folder
``_lakegate_attempts/`` of the dataset, next to the jobs' intents (``job_intent.py``):

- A task attempt whose fragments are written records their files (one PUT, before it reports
  to the driver) in an empty object whose name carries them,
  ``<write_id>/<partition>-<attempt>-<random>.<files as base64url JSON>.files``, or, when
  that name would be too long, in the body of ``<write_id>/<partition>-<attempt>-<random>.json``.
  Why in the name: an empty object is the cheapest PUT (SeaweedFS stores no data chunk: 1.2
  against 1.6-2.0 ms on a quiet node, more under load, issue 36), and a cleanup learns the
  files from its listing, without a GET per record.
- The driver, at commit (while the commit call runs) and at abort, and a recoverer finishing a
  dead driver's job, list the ledger, delete every file their job's records name that its
  commit does not use, then the records; only then does the job's intent go.
- The same listing shows the records of jobs whose intent is gone (:func:`sweep_ended`): an
  attempt that checked in after its job's cleanup listed the ledger. No commit uses their
  files (a commit uses only reported attempts, and every reported record was in its job's
  listing), so they are deleted, then the records.

So a late attempt's files stay until the next cleanup of a job on the same dataset, instead of
the attempt reading back whether its job ended (a GET after every task's PUT: 3.4 ms of a 50 ms
task on a busy 2-core node, issue 36). What stays open: an attempt killed (SIGKILL) between its
files landing and its record. Records written before this protocol (no ``"sweep"`` field) are
never swept: their job removed its intent even when its cleanup failed, so such a record may
name files its commit uses.

``create.json`` is the claim to create a missing dataset (:func:`claim_create`): Lance's create
is not exclusive (a second create commits as an Overwrite on top of the first, wiping an append
that landed in between), so of several appends that find no dataset only the claim's holder
creates it and the others wait for it.
"""

from __future__ import annotations

import base64
import binascii
import json
import logging
import time
import uuid
from collections import defaultdict
from collections.abc import Iterable, Sequence
from typing import Any

from lakegate_client.engine.job_intent import intent_name, job_intents
from lakegate_client.engine.stores import as_store, delete_all
from lakegate_client.engine.stores.base import ObjectStore, S3Location, each

__all__ = ["CREATE", "LEDGER", "check_in", "claim_create", "discard_unused", "has_records",
           "named_files", "sweep_ended"]

LEDGER = "_lakegate_attempts"
CREATE = f"{LEDGER}/create.json"
STALE_CREATE_S = 120.0  # a claim this old belongs to a job that died before creating
SWEEP = 2  # the "sweep" field of a record: once its job's intent is gone, any cleanup takes it
NAMED = ".files"  # a record whose name carries its files (always swept once its job ended)
NAME_MAX = 255  # the longest record name (one path segment: ADLS allows 255, S3 and GCS more)
log = logging.getLogger(__name__)


def _delete(s3: Any, where: S3Location, relative: Iterable[str]) -> None:
    """Delete the objects (idempotent): one batch on S3, else several at a time
    (``stores.delete_all``)."""
    delete_all(as_store(s3, where.bucket), [where.key(rel) for rel in relative])


def check_in(s3: Any, where: S3Location, write_id: str, partition: int, attempt: int,
             files: Sequence[str]) -> str:
    """Record an attempt's ``files`` (relative paths, landed already) before the attempt
    reports. Returns the record (relative path), which the attempt reports to the driver."""
    stem = f"{partition:05d}-{attempt}-{uuid.uuid4().hex[:8]}"
    token = base64.urlsafe_b64encode(json.dumps(list(files), separators=(",", ":")).encode())
    name = f"{stem}.{token.decode().rstrip('=')}{NAMED}"
    store = as_store(s3, where.bucket)
    if len(name) <= NAME_MAX:
        record = f"{LEDGER}/{write_id}/{name}"
        store.put(where.key(record), b"")
        return record
    record = f"{LEDGER}/{write_id}/{stem}.json"
    store.put(where.key(record), json.dumps({"files": list(files), "sweep": SWEEP}).encode())
    return record


def named_files(record: str) -> list[str] | None:
    """The files a record's name carries (:func:`check_in`); None: the name carries none (a
    ``.json`` record, or not a record at all)."""
    name = record.rsplit("/", 1)[-1]
    if not name.endswith(NAMED) or name.count(".") != 2:
        return None
    token = name.split(".")[1]
    try:
        files = json.loads(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)))
    except (ValueError, binascii.Error):  # UnicodeDecodeError too
        return None
    if not isinstance(files, list) or not all(isinstance(f, str) for f in files):
        return None
    return files


def _records(store: ObjectStore, where: S3Location) -> dict[str, list[str]]:
    """One listing of the ledger: every job's records (relative paths), by write id."""
    jobs: dict[str, list[str]] = defaultdict(list)
    for key in store.list(f"{where.prefix}/{LEDGER}/"):
        parts = where.relative(key).split("/")
        if len(parts) == 3 and parts[2].endswith((".json", NAMED)):  # LEDGER/<write id>/<rec>
            jobs[parts[1]].append("/".join(parts))
    return jobs


def _files_of(store: ObjectStore, where: S3Location, record: str,
              swept: bool = False) -> list[str] | None:
    """The files a record names (None: gone meanwhile; ``swept``: also None for a record from
    before :data:`SWEEP`, or one that is not a ledger record, which is never swept). A record
    whose name carries its files is read only when ``swept`` (to see it is still there).

    Raises:
        ValueError: the job's own record is not a ledger record (its cleanup fails, and the
            job's intent stays).
    """
    if record.endswith(NAMED):
        files = named_files(record)
        if files is None:
            _not_a_record(where, record, swept)
            return None
        if swept and store.head(where.key(record)) is None:  # removed meanwhile (its job)
            return None
        return files
    found = store.get(where.key(record))
    if found is None:  # removed meanwhile (another cleanup)
        return None
    try:
        body = json.loads(found[0] or b"{}")
    except ValueError:  # UnicodeDecodeError too
        body = None
    if not isinstance(body, dict) or not isinstance(body.get("files", []), list):
        _not_a_record(where, record, swept)
        return None
    if swept and body.get("sweep") != SWEEP:
        return None
    return [str(f) for f in body.get("files", ())]


def _not_a_record(where: S3Location, record: str, swept: bool) -> None:
    """An object under the ledger that is no attempt record: never swept (one bad object
    must not stop the sweep of the others); the job's own fails its cleanup."""
    if swept:
        log.warning("%s is not an attempt record; it is never swept", where.key(record))
        return
    raise ValueError(f"{where.key(record)} is not an attempt record")


def discard_unused(s3: Any, where: S3Location, write_id: str, used: Iterable[str],
                   reported: Iterable[str] = ()) -> list[str]:
    """Delete every file the job's attempts recorded that is not in ``used``, then the records;
    and sweep the records of ended jobs the same listing shows (:func:`sweep_ended`, best
    effort). Raises when the job's own cleanup failed: its intent must then stay, for a
    recoverer to finish it. Returns the job's deleted files.

    ``reported``: the records of the attempts whose fragments the commit used (all their files
    are in ``used``): not read again, only deleted, also when the listing does not show them
    yet (a sweep must never find a used attempt's record once its job's intent is gone).
    """
    kept, known = set(used), dict.fromkeys(reported)
    store = as_store(s3, where.bucket)
    jobs = _records(store, where)
    unknown = [r for r in jobs.pop(write_id, []) if r not in known]
    doomed = [f for files in each(lambda r: _files_of(store, where, r), unknown)
              for f in files or () if f not in kept]
    _delete(s3, where, doomed)  # files first: a record is dropped only once its files are gone
    _delete(s3, where, [*known, *unknown])
    if jobs:
        try:
            sweep_ended(store, where, jobs)
        except Exception:  # another job's debris; the next cleanup sweeps again
            log.warning("could not sweep the attempt records of ended writes at %s",
                        where.prefix, exc_info=True)
    return doomed


def sweep_ended(s3: Any, where: S3Location, jobs: dict[str, list[str]]) -> list[str]:
    """Delete the files and records of the ``jobs`` (write id: records, from a listing of the
    ledger made *before* this call) whose intent is gone; returns the deleted files.

    Why the order matters: a job's intent exists before any of its attempts writes, so a job
    with records in the earlier listing and no intent in the later one has ended, and its
    cleanup (which removes the intent only once it succeeded) already took every record its
    listing showed. What is left came later, from attempts no commit used.
    """
    store = as_store(s3, where.bucket)
    live = set(job_intents(store, where))
    ended = [r for write_id, records in jobs.items() if intent_name(write_id) not in live
             for r in records]
    found = dict(zip(ended, each(lambda r: _files_of(store, where, r, swept=True), ended),
                     strict=True))
    sweepable = [r for r in ended if found[r] is not None]
    doomed = [f for r in sweepable for f in found[r] or ()]
    _delete(s3, where, doomed)
    _delete(s3, where, sweepable)
    return doomed


def has_records(s3: Any, where: S3Location, write_id: str) -> bool:
    """Whether any attempt of the job recorded files (one listing of the job's records; ``s3``:
    an :class:`~lakegate_client.engine.stores.base.ObjectStore` or a boto3 S3 client)."""
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
