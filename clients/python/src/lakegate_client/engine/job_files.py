"""The visible files a job wrote under its table (named by its write id), and their deletion."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from lakegate_client.engine import stores
from lakegate_client.engine.stores.base import S3Location
from lakegate_client.tables.directory import delete_files, fs_path, list_files, write_id_of

if TYPE_CHECKING:
    from lakegate_client import TableCredentials


def drop_job_files(creds: TableCredentials, write_id: str, keep: Sequence[str]) -> list[str]:
    """Delete the job's visible files (named by its write id) that are not in ``keep``."""
    fs, root = creds.pyarrow_filesystem(), fs_path(creds.location)
    kept = set(keep)
    doomed = [rel for rel in list_files(fs, root) if write_id_of(rel) == write_id
              and rel not in kept]
    delete_under(creds, creds.location, doomed)
    return doomed


def delete_under(creds: TableCredentials, base: str, relative: Sequence[str]) -> None:
    """Delete files under ``base`` (a URI inside the table); already gone is fine.

    Why boto3 on S3: pyarrow's ``delete_file`` recreates an empty ``dir/`` marker object when it
    removes a directory's last file, and that marker would be debris under the table.
    """
    if not relative:
        return
    if stores.stages(creds):
        store, where = stores.table_store(creds), S3Location.parse(base)
        for rel in relative:
            store.delete(where.key(rel))
        return
    delete_files(creds.pyarrow_filesystem(), fs_path(base), relative)

