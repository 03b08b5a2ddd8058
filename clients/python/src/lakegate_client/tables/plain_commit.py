"""Commit a job's staged files into a plain directory table on S3, or fail loudly on a conflict.

Why: a plain table has no log, so two jobs that each "delete every file that is not mine" tear it.
The protocol here makes every outcome either a serial order of the jobs or a
:class:`WriteConflictError`:

- Planning (driver, before tasks run) records the table's data files with their ETags and the
  commit marker ``_lakegate_commit.json`` (hidden from every reader by its ``_`` prefix).
- An overwrite commits only against the marker it planned with: it swaps the marker to
  "committing" with a conditional PUT (``If-Match`` the planned ETag, ``If-None-Match: *`` when
  there was none), so of two overwrites planned against the same state only one proceeds. It then
  re-lists and compares with its plan: a file added, replaced or removed by anyone meanwhile (an
  append, a non-Lakegate writer) is a conflict. Only then does it complete its uploads, delete the
  planned files, and mark the marker "done". A job that planned while another overwrite was
  "committing" conflicts too (a committing marker older than ``STALE_COMMIT_S`` is a crashed job's
  and is ignored).
- An append deletes nothing, so it conflicts with nobody: it completes its uploads, and an
  overwrite that planned before it notices the new files when it re-lists.

Remaining windows (documented in the README): a writer that does not use the marker and lands a
file after an overwrite's re-list but before its deletes survives next to the new rows; a reader
listing during the complete/delete steps sees a mix (nothing here is one atomic step). SeaweedFS
and AWS S3 both honour ``If-Match``/``If-None-Match`` on PUT (probed on the local stack).
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from lakegate_client._errors import ConflictError
from lakegate_client.tables.directory import data_files
from lakegate_client.tables.staged import PendingUpload, S3Location, complete_uploads

__all__ = ["MARKER", "PlainPlan", "WriteConflictError", "commit_plain", "delete_job_files",
           "plan_plain"]

MARKER = "_lakegate_commit.json"
STALE_COMMIT_S = 300.0


class WriteConflictError(ConflictError):
    """Another writer changed the table between this job's planning and its commit."""


@dataclass(frozen=True)
class PlainPlan:
    """The table as a job planned against it (picklable; no secrets)."""

    files: tuple[tuple[str, str], ...]  # (relative path, ETag) of every data file
    marker_etag: str | None
    blocked_by: str | None  # write id of an overwrite that was committing at planning


def list_objects(s3: Any, where: S3Location) -> dict[str, str]:
    """Every object under the table: relative path → ETag (all pages)."""
    out: dict[str, str] = {}
    kwargs: dict[str, str] = {"Bucket": where.bucket, "Prefix": f"{where.prefix}/"}
    while True:
        page = s3.list_objects_v2(**kwargs)
        for obj in page.get("Contents", ()):
            out[where.relative(str(obj["Key"]))] = str(obj.get("ETag", ""))
        if not page.get("IsTruncated"):
            return out
        kwargs["ContinuationToken"] = str(page["NextContinuationToken"])


def _data(s3: Any, where: S3Location, fmt: str) -> dict[str, str]:
    objects = list_objects(s3, where)
    return {rel: objects[rel] for rel in data_files(objects, fmt)}


def _marker(s3: Any, where: S3Location) -> tuple[str | None, dict[str, Any]]:
    try:
        answer = s3.get_object(Bucket=where.bucket, Key=where.key(MARKER))
    except s3.exceptions.NoSuchKey:
        return None, {}
    body = json.loads(answer["Body"].read() or b"{}")
    return str(answer["ETag"]), body if isinstance(body, dict) else {}


def plan_plain(s3: Any, where: S3Location, fmt: str) -> PlainPlan:
    """Record what a job's commit will check: the data files and the commit marker."""
    etag, body = _marker(s3, where)
    committing = body.get("state") == "committing"
    fresh = time.time() - float(body.get("at", 0)) < STALE_COMMIT_S
    blocked = str(body.get("write_id")) if committing and fresh else None
    return PlainPlan(tuple(sorted(_data(s3, where, fmt).items())), etag, blocked)


def _put_marker(s3: Any, where: S3Location, state: str, write_id: str, etag: str | None) -> str:
    """Conditionally replace the marker; a lost race is a :class:`WriteConflictError`."""
    body = json.dumps({"write_id": write_id, "state": state, "at": time.time()}).encode()
    condition = {"IfMatch": etag} if etag else {"IfNoneMatch": "*"}
    try:
        answer = s3.put_object(Bucket=where.bucket, Key=where.key(MARKER), Body=body, **condition)
    except s3.exceptions.ClientError as exc:
        if exc.response.get("Error", {}).get("Code") in ("PreconditionFailed", "412"):
            raise WriteConflictError(
                "another overwrite of this table committed since this job planned; "
                "nothing was written, retry the job"
            ) from None
        raise
    return str(answer["ETag"])


def commit_plain(
    s3: Any,
    where: S3Location,
    fmt: str,
    plan: PlainPlan,
    uploads: Sequence[PendingUpload],
    *,
    overwrite: bool,
    write_id: str,
) -> list[str]:
    """Publish ``uploads`` (and on overwrite remove the planned files); returns what it deleted.

    Raises :class:`WriteConflictError` before anything becomes visible when another writer got
    in the way; the caller then aborts the uploads.
    """
    if not overwrite:
        complete_uploads(s3, where.bucket, uploads)
        return []
    if plan.blocked_by is not None:
        raise WriteConflictError(
            f"an overwrite of this table (write {plan.blocked_by}) was committing when this job "
            "planned; nothing was written, retry the job"
        )
    etag = _put_marker(s3, where, "committing", write_id, plan.marker_etag)
    try:
        now = _data(s3, where, fmt)
        planned = dict(plan.files)
        if now != planned:
            changed = sorted(set(now.items()) ^ set(planned.items()))
            raise WriteConflictError(
                f"the table changed since this job planned ({len(changed)} data files differ, "
                f"e.g. {changed[0][0]!r}); nothing was written, retry the job"
            )
        complete_uploads(s3, where.bucket, uploads)
        doomed = sorted(planned)
        delete_job_files(s3, where, doomed)
    finally:
        _put_marker(s3, where, "done", write_id, etag)
    return doomed


def delete_job_files(s3: Any, where: S3Location, relative: Sequence[str]) -> None:
    """Delete objects under the table (already gone is fine: S3 DELETE is idempotent)."""
    for rel in relative:
        s3.delete_object(Bucket=where.bucket, Key=where.key(rel))

