"""Directory tables (parquet, csv, json): plain data files under the table location.

Why plain files: Spark, pyarrow.dataset, DuckDB and Trino all read a directory of Parquet, CSV or
JSON files, and all of them skip paths with a ``_``- or ``.``-prefixed component. A table whose data
lived under such a path would look empty to every one of them.

The table is every file under its location whose relative path has no ``_``/``.``-prefixed
component and ends with the format's suffix (Hive partition folders such as ``day=1/`` included),
whoever wrote it. Lakegate writes ``part-<write-id>-<n:05d>-<random>.<ext>`` directly under the
location: the write id names one job's files, so a job can find (and remove) its own leftovers.

Nothing here is atomic across files (S3 has no rename and no multi-object commit):

- append: new files appear one by one as they are written;
- overwrite: the new files are written first, then the old ones are deleted, so a reader listing
  during the swap can see old and new rows (never an empty table);
- a failed job deletes its own files (best effort: a killed process can leave some behind; an S3
  object only appears once its upload completes, so there are no half-written objects).

Listings always use a ``FileSelector`` (``ListObjectsV2`` with prefix ``<key>/``), never a HEAD of
the bare location: a vended credential's session policy allows ``<key>/*`` only.
Tables written by older Lakegate versions (``_data/`` + ``_lakegate_log/``) are in ``legacy.py``.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from lakegate_client.tables.catalog import SUFFIXES

if TYPE_CHECKING:
    import pyarrow.fs as pafs

__all__ = [
    "Snapshot",
    "delete_files",
    "ensure_parent",
    "fs_path",
    "is_visible",
    "list_data_files",
    "new_data_file",
    "write_id_of",
]

_PREFIX = "part-"


@dataclass(frozen=True)
class Snapshot:
    """The live files of a directory table (paths relative to its location).

    Attributes:
        version: the legacy log version the files come from; 0 for a plain table.
    """

    version: int
    files: tuple[str, ...]


def fs_path(uri: str) -> str:
    """``s3://bucket/key`` → ``bucket/key``: the path form pyarrow filesystems take.

    ADLS locations name the account in the authority (``abfss://container@account.host/key``);
    ``AzureFileSystem`` wants ``container/key``.
    """
    scheme, sep, rest = uri.partition("://")
    if not sep:
        return uri.rstrip("/")
    if scheme == "file":
        return rest.rstrip("/") or "/"
    authority, slash, key = rest.partition("/")
    if scheme.lower() in _ADLS_SCHEMES and "@" in authority:
        rest = authority.split("@", 1)[0] + slash + key
    return rest.strip("/")


_ADLS_SCHEMES = frozenset({"abfs", "abfss", "wasb", "wasbs"})


def is_visible(relative: str) -> bool:
    """Hive convention: a path with a component starting with ``_`` or ``.`` is not data."""
    return not any(part.startswith(("_", ".")) for part in relative.split("/") if part)


def new_data_file(write_id: str, part: int, fmt: str) -> str:
    """Relative path for one file of one write job (unique per task attempt)."""
    suffix = SUFFIXES[fmt][0]
    return f"{_PREFIX}{write_id}-{part:05d}-{uuid.uuid4().hex[:12]}{suffix}"


def write_id_of(relative: str) -> str | None:
    """The write id in a Lakegate-written file name, else None (a file another tool landed)."""
    name = relative.rsplit("/", 1)[-1]
    if not name.startswith(_PREFIX):
        return None
    write_id, sep, _ = name[len(_PREFIX) :].partition("-")
    return write_id if sep else None


def list_files(fs: pafs.FileSystem, root: str) -> list[str]:
    """Every file under ``root`` (relative paths, sorted), by listing the ``root/`` prefix."""
    import pyarrow.fs as pafs

    infos = fs.get_file_info(pafs.FileSelector(root, recursive=True, allow_not_found=True))
    prefix = root.rstrip("/") + "/"
    return sorted(
        info.path[len(prefix) :]
        for info in infos
        if info.is_file and info.path.startswith(prefix)
    )


def data_files(relative_paths: Iterable[str], fmt: str) -> list[str]:
    """The table's data files among ``relative_paths``: visible, with the format's suffix."""
    return [rel for rel in relative_paths if is_visible(rel) and rel.endswith(SUFFIXES[fmt])]


def list_data_files(fs: pafs.FileSystem, root: str, fmt: str) -> list[str]:
    """The plain table: every visible file of its format under ``root``."""
    return data_files(list_files(fs, root), fmt)


def ensure_parent(fs: pafs.FileSystem, path: str) -> None:
    """Local filesystems need directories; object stores must not be asked (a credential scoped
    to the table's prefix may not touch the bucket itself)."""
    import pyarrow.fs as pafs

    if isinstance(fs, pafs.LocalFileSystem):
        fs.create_dir(path.rsplit("/", 1)[0], recursive=True)


def delete_files(fs: pafs.FileSystem, root: str, relative: Sequence[str]) -> None:
    """Delete files under ``root`` (already gone is fine: cleanup may run twice)."""
    for rel in relative:
        try:
            fs.delete_file(f"{root}/{rel}")
        except FileNotFoundError:
            continue


def replace_files(
    fs: pafs.FileSystem, root: str, fmt: str, keep: Iterable[str], *, overwrite: bool, write_id: str
) -> list[str]:
    """Finish a write whose files ``keep`` are in place; returns what it deleted.

    Deletes this job's other files (failed or duplicate task attempts, never committed), and on
    ``overwrite`` every other data file of the table, so that a plain listing sees exactly the
    table's rows. Run only after every new file is written.
    """
    kept = set(keep)
    doomed = [
        rel
        for rel in list_data_files(fs, root, fmt)
        if rel not in kept and (overwrite or write_id_of(rel) == write_id)
    ]
    delete_files(fs, root, doomed)
    return doomed
