"""An overwrite that writes no rows still leaves a plain table its schema.

Why: a plain table's schema is its files'. A Spark overwrite with an empty DataFrame has no
task that writes a file, so without this the commit deletes every file and the next read fails
with "no data files yet" instead of answering 0 rows. :func:`schema_part` writes one Parquet
file of the write's schema and no rows (staged like a task's file where the job stages), for the
commit to publish in place of the old files.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from lakegate_client.engine.staged import stage_parquet
from lakegate_client.engine.stores.base import PendingUpload, S3Location
from lakegate_client.tables.directory import fs_path, new_data_file
from lakegate_client.tables.files import write_parquet_batches

if TYPE_CHECKING:
    import pyarrow as pa

    from lakegate_client.credentials import TableCredentials

__all__ = ["schema_part"]


def schema_part(creds: TableCredentials, write_id: str, schema: pa.Schema,
                store: Any = None) -> tuple[str, PendingUpload | None]:
    """The empty file's path (relative to the table) and, with ``store`` (the job stages), its
    pending upload; without, the file is written in place (the commit names it)."""
    rel = new_data_file(write_id, 0, "parquet")
    if store is not None:
        where = S3Location.parse(creds.location)
        return rel, stage_parquet(store, where.bucket, where.key(rel), schema, ())
    write_parquet_batches(creds.pyarrow_filesystem(), f"{fs_path(creds.location)}/{rel}",
                          schema, ())
    return rel, None
