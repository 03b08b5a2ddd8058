"""Read or write a whole generic table as Arrow, whatever its format.

Each format uses the matching adapter of ``TableCredentials``: directory tables through
``creds.pyarrow_filesystem()``, Delta through ``delta_storage_options()``, Lance through
``lance_storage_options()``.
"""

from __future__ import annotations

import importlib.util
import logging
import uuid
from collections.abc import Sequence
from typing import TYPE_CHECKING, Literal

from lakegate_client.tables.catalog import (
    DIRECTORY_FORMATS,
    TableFormatError,
    TableInfo,
    describe_table,
    ensure_table,
)
from lakegate_client.tables.directory import (
    delete_files,
    fs_path,
    list_files,
    new_data_file,
    replace_files,
)
from lakegate_client.tables.files import read_file, write_file
from lakegate_client.tables.planning_refusal import undone_on_refusal
from lakegate_client.tables.snapshot import convert_to_plain, current_snapshot

if TYPE_CHECKING:
    import pyarrow as pa
    import pyarrow.dataset as pads

    from lakegate_client._client import Client
    from lakegate_client.credentials import TableCredentials

__all__ = ["Mode", "arrow_dataset", "read_table", "write_table"]
log = logging.getLogger(__name__)

Mode = Literal["append", "overwrite"]


def read_table(
    client: Client,
    namespace: str | Sequence[str],
    table: str,
    *,
    warehouse: str | None = None,
    columns: Sequence[str] | None = None,
) -> pa.Table:
    """Read a whole generic table as one Arrow table, whatever its format."""
    import pyarrow as pa

    info = describe_table(client, namespace, table, warehouse=warehouse)
    creds = client.credentials(list(info.namespace), table, warehouse=warehouse, access="read",
                               expected_location=info.location)  # the table just described
    cols = list(columns) if columns is not None else None
    if info.format in ("delta", "lance") and creds.storage in ("s3", "adls", "gcs"):
        _finish_abandoned(client, info, creds, warehouse)
    if info.format == "delta":
        from deltalake import DeltaTable

        delta = DeltaTable(creds.location, storage_options=creds.delta_storage_options())
        return delta.to_pyarrow_table(columns=cols)
    if info.format == "lance":
        import lance

        return lance.dataset(
            creds.location, storage_options=creds.lance_storage_options()
        ).to_table(columns=cols)
    fs, root = creds.pyarrow_filesystem(), fs_path(creds.location)
    files = list_files(fs, root)
    if creds.storage in ("s3", "adls", "gcs") and _has_intent(files):  # a crashed writer's commit
        _finish_abandoned(client, info, creds, warehouse)  # is finished, not read torn
        files = list_files(fs, root)  # what the roll-forward left
    snapshot = current_snapshot(fs, root, info.format, files)
    parts = [read_file(fs, f"{root}/{rel}", info.format) for rel in snapshot.files]
    if not parts:
        return pa.table({})
    merged = pa.concat_tables(parts, promote_options="default")
    return merged.select(cols) if cols is not None else merged


def _finish_abandoned(client: Client, info: TableInfo, creds: TableCredentials,
                      warehouse: str | None) -> None:
    """Finish what a writer that died left (``engine/protocol.py``: a plain commit rolled
    forward, a Delta or Lance job's files removed): one listing with the read credential, and
    only when something was left a write credential. Best effort: a caller without write
    access, or without boto3 on S3 (the core client installs only httpx; such jobs are written
    with the Spark or s3 extra), reads the table as it is, with a warning."""
    if creds.storage == "s3" and importlib.util.find_spec("boto3") is None:
        log.warning("%s may hold a commit a writer left; install boto3 "
                    "(lakegate-client[s3]) for reads to finish it", info.name)
        return
    from lakegate_client.engine.formats import protocol_for

    protocol_for(info.format).finish_abandoned(creds, lambda: client.credentials(
        list(info.namespace), info.name, warehouse=warehouse, access="write",
        expected_location=info.location).with_storage_endpoint(creds.storage_endpoint))


def _has_intent(files: Sequence[str]) -> bool:
    """Whether a listing of the table (``list_files``) holds a top-level commit intent."""
    from lakegate_client.engine.formats.plain import INTENT_PREFIX

    return any(rel.startswith(INTENT_PREFIX) and "/" not in rel for rel in files)


def arrow_dataset(creds: TableCredentials, fmt: str) -> pads.Dataset:
    """A parquet/csv/json table as a ``pyarrow.dataset.Dataset`` over exactly its live files.

    Why not ``pyarrow.dataset.dataset(location)``: that first HEADs the bare location, which a
    vended credential (session policy on ``<key>/*``) may not allow; this lists ``<key>/`` only.
    """
    import pyarrow.dataset as pads

    if fmt not in DIRECTORY_FORMATS:
        raise TableFormatError(f"{fmt!r} is not a directory format; use its own library")
    fs, root = creds.pyarrow_filesystem(), fs_path(creds.location)
    files = current_snapshot(fs, root, fmt).files
    return pads.dataset([f"{root}/{rel}" for rel in files], filesystem=fs, format=fmt)


def write_table(
    client: Client,
    namespace: str | Sequence[str],
    table: str,
    data: pa.Table | Sequence[pa.Table],
    *,
    warehouse: str | None = None,
    format: str | None = None,
    mode: Mode = "append",
    create: bool = False,
) -> TableInfo:
    """Write Arrow data to a generic table (creating it in the catalog when asked).

    ``data`` may be several tables: a directory table then gets one file per table, written one by
    one (NOT atomic: a reader listing meanwhile sees some of them; an overwrite deletes the old
    files only after every new one is written; a failed write deletes its own files; concurrent
    calls are not coordinated). Delta and Lance get their concatenation, in one atomic commit.
    """
    import pyarrow as pa

    if mode not in ("append", "overwrite"):
        raise ValueError(f"mode must be 'append' or 'overwrite', got {mode!r}")
    parts = [data] if isinstance(data, pa.Table) else list(data)
    if not parts:
        raise ValueError("nothing to write")
    created: list[TableInfo] = []
    info = ensure_table(client, namespace, table, fmt=format, create=create, warehouse=warehouse,
                        on_create=created.append)
    with undone_on_refusal(created, lambda t: client.drop(list(t.namespace), t.name,
                                                          warehouse=warehouse)):
        creds = client.credentials(list(info.namespace), table, warehouse=warehouse,
                                   access="write", expected_location=info.location)
        if info.format == "delta":  # a store deltalake cannot reach (GCS): refused here
            creds.delta_storage_options()
    if info.format in DIRECTORY_FORMATS:
        _write_directory(creds, info.format, parts, overwrite=mode == "overwrite")
        return info
    merged = pa.concat_tables(parts, promote_options="default")
    if info.format == "delta":
        from deltalake import write_deltalake

        write_deltalake(
            creds.location, merged, mode=mode, storage_options=creds.delta_storage_options()
        )
    else:
        _write_lance(creds, merged, mode)
    return info


def _write_directory(
    creds: TableCredentials, fmt: str, parts: Sequence[pa.Table], *, overwrite: bool
) -> None:
    """Plain files under the location: write every new file, then delete what they replace."""
    fs, root = creds.pyarrow_filesystem(), fs_path(creds.location)
    convert_to_plain(fs, root, fmt)
    write_id = uuid.uuid4().hex
    files = [new_data_file(write_id, i, fmt) for i in range(len(parts))]
    try:
        for rel, part in zip(files, parts, strict=True):
            write_file(fs, f"{root}/{rel}", part, fmt)
    except BaseException:
        try:  # a failed write leaves nothing behind (files not yet written are simply absent)
            delete_files(fs, root, files)
        except OSError:
            pass  # the original error matters more; the files are named by this write id
        raise
    replace_files(fs, root, fmt, files, overwrite=overwrite, write_id=write_id)


def _write_lance(creds: TableCredentials, data: pa.Table, mode: Mode) -> None:
    import lance

    options = creds.lance_storage_options()
    try:
        lance.dataset(creds.location, storage_options=options)
    except (ValueError, OSError):  # no dataset yet: lance reports "not found" as one of these
        lance.write_dataset(data, creds.location, mode="create", storage_options=options)
        return
    lance.write_dataset(data, creds.location, mode=mode, storage_options=options)
