"""Read and write a Lakekeeper generic table as Arrow, with credentials fetched from the gateway.

Why: a user (or a Spark task) should name a table and get data, never remap catalog keys to an
engine's option names by hand. Each format uses the matching adapter of ``TableCredentials``.

Formats:

- ``parquet``, ``csv``, ``json`` (JSON lines): a *directory table*, data files under the table's
  base location, read and written with ``pyarrow`` through ``creds.pyarrow_filesystem()``.
- ``delta``: a Delta Lake table at the base location (``deltalake``, ``delta_storage_options()``).
- ``lance``: a Lance dataset at the base location (``pylance``, ``lance_storage_options()``).

Directory-table commit protocol. Why: S3 has no atomic rename and Lakekeeper has no commit endpoint
for generic tables, so a write can only become visible through one atomic object PUT:

1. data files are written under ``<base>/_data/<write-id>/``: the leading ``_`` hides them from
   every directory scan (ours and other engines'), so they are invisible until committed;
2. the commit writes ONE object, ``<base>/_lakegate_log/<version:020d>.json``, holding the complete
   list of live files (paths relative to the base location);
3. readers use the highest version. A table with no log yet (files landed by another tool) is read
   as every file under the base location whose path has no component starting with ``_`` or ``.``
   (the Hive convention), and the first commit carries those files forward.

A job that fails before step 2 leaves only unlisted files behind, so the table stays readable at
its previous version. ``overwrite`` lists only the new files; the old ones stay on storage (a reader
in flight keeps working) until the table is purged. One writer per table at a time: pyarrow's S3
filesystem has no conditional PUT, so concurrent commits are last-writer-wins.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from lakegate_client import ConflictError, LakegateError, NotFoundError

if TYPE_CHECKING:
    import pyarrow as pa
    import pyarrow.fs as pafs

    from lakegate_client import Client, LoadedTable, TableCredentials

FORMATS: tuple[str, ...] = ("parquet", "csv", "json", "lance", "delta")
DIRECTORY_FORMATS: tuple[str, ...] = ("parquet", "csv", "json")
LOG_DIR = "_lakegate_log"
DATA_DIR = "_data"
_SUFFIXES: dict[str, tuple[str, ...]] = {
    "parquet": (".parquet",),
    "csv": (".csv",),
    "json": (".json", ".jsonl", ".ndjson"),
}
Mode = Literal["append", "overwrite"]


class TableFormatError(LakegateError, ValueError):
    """The table's format is unknown, or the operation is not supported for it."""


@dataclass(frozen=True)
class TableInfo:
    """What the catalog says about a generic table: enough to find and decode its data."""

    namespace: tuple[str, ...]
    name: str
    format: str
    location: str


@dataclass(frozen=True)
class Snapshot:
    """The live files of a directory table at one log version (0 = no log yet)."""

    version: int
    files: tuple[str, ...]


def split_table_name(name: str) -> tuple[tuple[str, ...], str]:
    """``"a.b.table"`` → ``(("a", "b"), "table")``: the last dotted part is the table."""
    parts = name.split(".")
    if len(parts) < 2 or not all(parts):
        raise ValueError(f"table name must look like 'namespace.table', got {name!r}")
    return tuple(parts[:-1]), parts[-1]


def namespace_parts(namespace: str | Sequence[str]) -> tuple[str, ...]:
    """``"a.b"`` or ``["a", "b"]`` → ``("a", "b")`` (the client's rule: dots separate levels)."""
    return tuple(namespace.split(".")) if isinstance(namespace, str) else tuple(namespace)


def check_format(fmt: str) -> str:
    """Normalise a format name and refuse the ones this module cannot decode."""
    normalised = fmt.strip().lower()
    if normalised not in FORMATS:
        raise TableFormatError(f"unsupported table format {fmt!r}; supported: {', '.join(FORMATS)}")
    return normalised


def describe_table(
    client: Client, namespace: str | Sequence[str], table: str, *, warehouse: str | None = None
) -> TableInfo:
    """Load the table's metadata (no credentials) from the gateway."""
    ns = namespace_parts(namespace)
    loaded = client.load(list(ns), table, warehouse=warehouse)
    return _table_info(ns, table, loaded)


def ensure_table(
    client: Client,
    namespace: str | Sequence[str],
    table: str,
    *,
    fmt: str | None,
    create: bool,
    warehouse: str | None = None,
) -> TableInfo:
    """Describe the table, creating it (catalog-assigned location) when asked and missing."""
    ns = namespace_parts(namespace)
    try:
        info = describe_table(client, ns, table, warehouse=warehouse)
    except NotFoundError:
        if not create:
            raise
        if fmt is None:
            raise TableFormatError("creating a table needs a format") from None
        try:
            created = client.create(list(ns), table, format=check_format(fmt), warehouse=warehouse)
        except ConflictError:  # another writer created it first: use theirs
            return ensure_table(client, ns, table, fmt=fmt, create=False, warehouse=warehouse)
        return _table_info(ns, table, created)
    if fmt is not None and check_format(fmt) != info.format:
        raise TableFormatError(
            f"table {'.'.join(ns)}.{table} has format {info.format!r}, not {fmt!r}"
        )
    return info


def _table_info(ns: tuple[str, ...], table: str, loaded: LoadedTable) -> TableInfo:
    """Pick format and base location out of the client's load/create answer."""
    fmt, location = loaded.format, loaded.base_location
    if not fmt or not location:
        raise TableFormatError(f"the catalog gave no format/location for {'.'.join(ns)}.{table}")
    return TableInfo(
        namespace=ns, name=table, format=check_format(str(fmt)), location=str(location)
    )


# --- storage paths -----------------------------------------------------------------------------


def fs_path(uri: str) -> str:
    """``s3://bucket/key`` → ``bucket/key``: the path form pyarrow filesystems take."""
    scheme, sep, rest = uri.partition("://")
    if not sep:
        return uri.rstrip("/")
    if scheme == "file":
        return rest.rstrip("/") or "/"
    return rest.strip("/")


def is_visible(relative: str) -> bool:
    """Hive convention: a path with a component starting with ``_`` or ``.`` is not data."""
    return not any(part.startswith(("_", ".")) for part in relative.split("/") if part)


def new_data_file(write_id: str, part: int, fmt: str) -> str:
    """Relative path for one file of one write job (unique per task attempt)."""
    suffix = _SUFFIXES[fmt][0]
    return f"{DATA_DIR}/{write_id}/part-{part:05d}-{uuid.uuid4().hex[:12]}{suffix}"


def current_snapshot(fs: pafs.FileSystem, root: str, fmt: str) -> Snapshot:
    """The live files of a directory table: the latest log entry, else a listing."""
    import pyarrow.fs as pafs

    log_root = f"{root}/{LOG_DIR}"
    entries = fs.get_file_info(pafs.FileSelector(log_root, allow_not_found=True))
    versions = sorted(e.base_name for e in entries if e.is_file and e.base_name.endswith(".json"))
    if versions:
        with fs.open_input_stream(f"{log_root}/{versions[-1]}") as stream:
            entry = json.loads(stream.read())
        return Snapshot(version=int(entry["version"]), files=tuple(entry["files"]))
    return Snapshot(version=0, files=tuple(_scan(fs, root, fmt)))


def _scan(fs: pafs.FileSystem, root: str, fmt: str) -> list[str]:
    import pyarrow.fs as pafs

    infos = fs.get_file_info(pafs.FileSelector(root, recursive=True, allow_not_found=True))
    prefix = root.rstrip("/") + "/"
    found = []
    for info in infos:
        if not info.is_file or not info.path.startswith(prefix):
            continue
        relative = info.path[len(prefix) :]
        if is_visible(relative) and relative.endswith(_SUFFIXES[fmt]):
            found.append(relative)
    return sorted(found)


def commit_files(
    fs: pafs.FileSystem,
    root: str,
    fmt: str,
    new_files: Sequence[str],
    *,
    overwrite: bool,
    write_id: str,
) -> Snapshot:
    """Publish ``new_files`` with one atomic PUT of the next log entry."""
    current = current_snapshot(fs, root, fmt)
    files = tuple(new_files) if overwrite else current.files + tuple(new_files)
    version = current.version + 1
    entry = {
        "version": version,
        "operation": "overwrite" if overwrite else "append",
        "write_id": write_id,
        "format": fmt,
        "timestamp_ms": int(time.time() * 1000),
        "files": list(files),
    }
    path = f"{root}/{LOG_DIR}/{version:020d}.json"
    _ensure_parent(fs, path)
    with fs.open_output_stream(path) as out:
        out.write(json.dumps(entry, indent=1).encode())
    return Snapshot(version=version, files=files)


def _ensure_parent(fs: pafs.FileSystem, path: str) -> None:
    """Local filesystems need directories; object stores must not be asked (a credential scoped
    to the table's prefix may not touch the bucket itself)."""
    import pyarrow.fs as pafs

    if isinstance(fs, pafs.LocalFileSystem):
        fs.create_dir(path.rsplit("/", 1)[0], recursive=True)


def delete_files(fs: pafs.FileSystem, root: str, relative: Sequence[str]) -> None:
    """Remove uncommitted files of a failed job (they are invisible anyway)."""
    for rel in relative:
        fs.delete_file(f"{root}/{rel}")


# --- file codecs -------------------------------------------------------------------------------


def read_file(fs: pafs.FileSystem, path: str, fmt: str) -> pa.Table:
    """Decode one data file of a directory table."""
    if fmt == "parquet":
        import pyarrow.parquet as pq

        return pq.read_table(path, filesystem=fs)
    with fs.open_input_stream(path) as stream:
        if fmt == "csv":
            import pyarrow.csv as pcsv

            return pcsv.read_csv(stream)
        if fmt == "json":
            import pyarrow.json as pjson

            return pjson.read_json(stream)
    raise TableFormatError(f"{fmt!r} is not a directory format")


def write_parquet_batches(
    fs: pafs.FileSystem, path: str, schema: pa.Schema, batches: Iterable[pa.RecordBatch]
) -> int:
    """Stream batches into one Parquet file (memory stays at one batch); returns its size."""
    import pyarrow.parquet as pq

    _ensure_parent(fs, path)
    with fs.open_output_stream(path) as out, pq.ParquetWriter(out, schema) as writer:
        for batch in batches:
            writer.write_batch(batch)
    return int(fs.get_file_info(path).size)


def write_file(fs: pafs.FileSystem, path: str, data: pa.Table, fmt: str) -> int:
    """Encode one data file of a directory table; returns its size in bytes."""
    _ensure_parent(fs, path)
    if fmt == "parquet":
        import pyarrow.parquet as pq

        pq.write_table(data, path, filesystem=fs)
    else:
        with fs.open_output_stream(path) as out:
            if fmt == "csv":
                import pyarrow.csv as pcsv

                pcsv.write_csv(data, out)
            elif fmt == "json":
                for row in data.to_pylist():
                    out.write(json.dumps(row, default=str).encode() + b"\n")
            else:
                raise TableFormatError(f"{fmt!r} is not a directory format")
    return int(fs.get_file_info(path).size)


# --- whole-table helpers -----------------------------------------------------------------------


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
    creds = client.credentials(list(info.namespace), table, warehouse=warehouse, access="read")
    cols = list(columns) if columns is not None else None
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
    snapshot = current_snapshot(fs, root, info.format)
    parts = [read_file(fs, f"{root}/{rel}", info.format) for rel in snapshot.files]
    if not parts:
        return pa.table({})
    merged = pa.concat_tables(parts, promote_options="default")
    return merged.select(cols) if cols is not None else merged


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

    ``data`` may be several tables: a directory table then gets one file per table, published by
    one commit (a multi-file drop lands atomically); Delta and Lance get their concatenation.
    """
    import pyarrow as pa

    if mode not in ("append", "overwrite"):
        raise ValueError(f"mode must be 'append' or 'overwrite', got {mode!r}")
    parts = [data] if isinstance(data, pa.Table) else list(data)
    if not parts:
        raise ValueError("nothing to write")
    info = ensure_table(client, namespace, table, fmt=format, create=create, warehouse=warehouse)
    creds = client.credentials(list(info.namespace), table, warehouse=warehouse, access="write")
    if info.format in DIRECTORY_FORMATS:
        fs, root = creds.pyarrow_filesystem(), fs_path(creds.location)
        write_id = uuid.uuid4().hex
        files = [new_data_file(write_id, i, info.format) for i in range(len(parts))]
        for rel, part in zip(files, parts, strict=True):
            write_file(fs, f"{root}/{rel}", part, info.format)
        commit_files(fs, root, info.format, files, overwrite=mode == "overwrite", write_id=write_id)
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


def _write_lance(creds: TableCredentials, data: pa.Table, mode: Mode) -> None:
    import lance

    options = creds.lance_storage_options()
    try:
        lance.dataset(creds.location, storage_options=options)
    except (ValueError, OSError):  # no dataset yet: lance reports "not found" as one of these
        lance.write_dataset(data, creds.location, mode="create", storage_options=options)
        return
    lance.write_dataset(data, creds.location, mode=mode, storage_options=options)
