"""The directory-table commit protocol for parquet, csv and json tables.

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
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from lakegate_client.tables.catalog import SUFFIXES

if TYPE_CHECKING:
    import pyarrow.fs as pafs

__all__ = [
    "DATA_DIR",
    "LOG_DIR",
    "Snapshot",
    "commit_files",
    "current_snapshot",
    "delete_files",
    "ensure_parent",
    "fs_path",
    "is_visible",
    "new_data_file",
]

LOG_DIR = "_lakegate_log"
DATA_DIR = "_data"


@dataclass(frozen=True)
class Snapshot:
    """The live files of a directory table at one log version (0 = no log yet)."""

    version: int
    files: tuple[str, ...]


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
    suffix = SUFFIXES[fmt][0]
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
        if is_visible(relative) and relative.endswith(SUFFIXES[fmt]):
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
    ensure_parent(fs, path)
    with fs.open_output_stream(path) as out:
        out.write(json.dumps(entry, indent=1).encode())
    return Snapshot(version=version, files=files)


def ensure_parent(fs: pafs.FileSystem, path: str) -> None:
    """Local filesystems need directories; object stores must not be asked (a credential scoped
    to the table's prefix may not touch the bucket itself)."""
    import pyarrow.fs as pafs

    if isinstance(fs, pafs.LocalFileSystem):
        fs.create_dir(path.rsplit("/", 1)[0], recursive=True)


def delete_files(fs: pafs.FileSystem, root: str, relative: Sequence[str]) -> None:
    """Remove uncommitted files of a failed job (they are invisible anyway)."""
    for rel in relative:
        fs.delete_file(f"{root}/{rel}")
