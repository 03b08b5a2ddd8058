"""The driver's half of a Spark write: publish what the reported task attempts wrote, or nothing.

Why a module of its own: tasks (``writer.py``) only ever *stage* data; every decision about what
becomes visible is made here, once, by the one process that knows which attempts Spark accepted.

- Plain tables and Delta on S3: tasks leave multipart uploads pending (``tables/staged.py``).
  Commit completes the reported ones (plain: under the conflict protocol of
  ``tables/plain_commit.py``; Delta: then one Delta transaction adds them); abort aborts them.
  Both then sweep the job's other pending uploads when the credential may list them.
- Other storage (no multipart API here): tasks write visible files named by the write id; commit
  and abort delete every file of the job that is not published.
- Lance: one commit of the reported fragments; append never overwrites (see ``commit_lance``).
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Literal

from lakegate_client.tables.directory import delete_files, fs_path, list_files, write_id_of
from lakegate_client.tables.plain_commit import PlainPlan, commit_plain
from lakegate_client.tables.staged import (
    PendingUpload,
    S3Location,
    abort_uploads,
    complete_uploads,
    sweep_uploads,
)

if TYPE_CHECKING:
    import pyarrow as pa

    from lakegate_client import TableCredentials

LANCE_CREATE_ATTEMPTS = 5


def s3_client(creds: TableCredentials) -> Any:
    """A boto3 S3 client on the credential (one per commit: credentials are short-lived)."""
    import boto3

    return boto3.session.Session().client("s3", **creds.boto3_kwargs())


def sweep(s3: Any, where: S3Location, write_id: str) -> int:
    """Abort the job's pending uploads left by failed, duplicate or late attempts.

    Lakekeeper's session policy grants no ``s3:ListBucketMultipartUploads``, so under a vended
    credential this listing is refused (AccessDenied): then nothing is swept here, and those
    invisible uploads wait for the bucket's ``AbortIncompleteMultipartUpload`` lifecycle rule.
    Returns how many uploads were aborted (-1: listing refused).
    """
    try:
        return sweep_uploads(s3, where, write_id)
    except s3.exceptions.ClientError as exc:
        if exc.response.get("Error", {}).get("Code") == "AccessDenied":
            return -1
        raise


def discard_staged(s3: Any, where: S3Location, uploads: Sequence[PendingUpload],
                   write_id: str) -> None:
    """Abort reported uploads, then sweep the job's others (abort and failed commits)."""
    abort_uploads(s3, where.bucket, [(u.key, u.upload_id) for u in uploads])
    sweep(s3, where, write_id)


def publish_plain(creds: TableCredentials, fmt: str, plan: PlainPlan,
                  uploads: Sequence[PendingUpload], *, overwrite: bool, write_id: str) -> None:
    """Complete a plain job's uploads under the conflict protocol; on failure abort them."""
    s3, where = s3_client(creds), S3Location.parse(creds.location)
    try:
        commit_plain(s3, where, fmt, plan, uploads, overwrite=overwrite, write_id=write_id)
    except BaseException:
        discard_staged(s3, where, uploads, write_id)
        raise
    sweep(s3, where, write_id)


def publish_delta(creds: TableCredentials, schema: pa.Schema, files: Sequence[Any],
                  uploads: Sequence[PendingUpload], *, overwrite: bool, write_id: str) -> None:
    """Complete the staged files, then add them (``files``: ``WrittenFile``) in one Delta commit.

    Completed-but-uncommitted files are unreferenced (no Delta reader sees them); a failed
    transaction deletes them.
    """
    s3 = s3_client(creds) if uploads else None
    where = S3Location.parse(creds.location)
    if s3 is not None:
        complete_uploads(s3, where.bucket, uploads)
    try:
        _delta_transaction(creds, schema, files, overwrite=overwrite)
    except BaseException:
        drop_job_files(creds, write_id, keep=())
        raise
    drop_job_files(creds, write_id, keep=[f.path for f in files])
    if s3 is not None:
        sweep(s3, where, write_id)


def _delta_transaction(creds: TableCredentials, schema: pa.Schema, files: Sequence[Any], *,
                       overwrite: bool) -> None:
    from deltalake import DeltaTable, Schema
    from deltalake.transaction import AddAction, RemoveAction, create_table_with_add_actions

    options = creds.delta_storage_options()
    adds = [
        AddAction(path=f.path, size=f.size, partition_values={}, modification_time=f.modified_ms,
                  data_change=True, stats=json.dumps({"numRecords": f.rows}))
        for f in files
    ]
    mode: Literal["overwrite", "append"] = "overwrite" if overwrite else "append"
    if DeltaTable.is_deltatable(creds.location, storage_options=options):
        table = DeltaTable(creds.location, storage_options=options)
        actions: list[AddAction | RemoveAction] = [*adds]  # the API takes the wider list type
        table.create_write_transaction(actions, mode=mode, schema=schema)
    else:
        create_table_with_add_actions(creds.location, Schema.from_arrow(schema), adds, mode=mode,
                                      storage_options=options)


def drop_job_files(creds: TableCredentials, write_id: str, keep: Sequence[str]) -> list[str]:
    """Delete the job's visible files (named by its write id) that are not in ``keep``."""
    fs, root = creds.pyarrow_filesystem(), fs_path(creds.location)
    kept = set(keep)
    doomed = [rel for rel in list_files(fs, root) if write_id_of(rel) == write_id
              and rel not in kept]
    delete_under(creds, creds.location, doomed)
    return doomed


def commit_lance(creds: TableCredentials, schema: pa.Schema, fragments_json: Sequence[str], *,
                 overwrite: bool, read_version: int | None) -> None:
    """One Lance commit of the fragments.

    Overwrite replaces whatever version is current (last writer wins, a serial order). Append
    never overwrites: it appends against the version that exists at commit time, creating an
    empty dataset first when there is none (of two creators one gets "already exists" and both
    then append), and Lance's own commit retries rebase concurrent appends (``max_retries``).
    """
    import lance
    from lance.fragment import FragmentMetadata

    fragments = [FragmentMetadata.from_json(f) for f in fragments_json]
    options = creds.lance_storage_options()
    if overwrite:
        lance.LanceDataset.commit(creds.location, lance.LanceOperation.Overwrite(schema, fragments),
                                  read_version=read_version, storage_options=options)
        return
    for attempt in range(LANCE_CREATE_ATTEMPTS):
        version = lance_version(creds)
        if version is None:
            try:
                lance.write_dataset(schema.empty_table(), creds.location, mode="create",
                                    storage_options=options)
            except OSError:  # another job created it between our look and our create
                time.sleep(0.05 * (attempt + 1))
            continue
        lance.LanceDataset.commit(creds.location, lance.LanceOperation.Append(fragments),
                                  read_version=version, storage_options=options)
        return
    raise RuntimeError(f"could not create or find the Lance dataset at {creds.location}")


def drop_lance_fragments(creds: TableCredentials, fragments_json: Sequence[str]) -> None:
    """Delete the data files of uncommitted fragments (a failed job's, or a failed task's)."""
    from lance.fragment import FragmentMetadata

    paths = [f"data/{data_file.path}" for f in fragments_json
             for data_file in FragmentMetadata.from_json(f).files]
    delete_under(creds, creds.location, paths)


def delete_under(creds: TableCredentials, base: str, relative: Sequence[str]) -> None:
    """Delete files under ``base`` (a URI inside the table); already gone is fine.

    Why boto3 on S3: pyarrow's ``delete_file`` recreates an empty ``dir/`` marker object when it
    removes a directory's last file, and that marker would be debris under the table.
    """
    if not relative:
        return
    if creds.storage == "s3":
        s3, where = s3_client(creds), S3Location.parse(base)
        for rel in relative:
            s3.delete_object(Bucket=where.bucket, Key=where.key(rel))
        return
    delete_files(creds.pyarrow_filesystem(), fs_path(base), relative)


def lance_version(creds: TableCredentials) -> int | None:
    """The dataset's current version (``None``: no dataset yet)."""
    import lance

    try:
        return int(lance.dataset(creds.location,
                                 storage_options=creds.lance_storage_options()).version)
    except (ValueError, OSError):
        return None
