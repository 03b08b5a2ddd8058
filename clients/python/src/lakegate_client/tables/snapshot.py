"""Which files a directory table is right now, including tables in Lakegate's old layout.

Lakegate once wrote directory tables as ``_data/<write-id>/part-*`` files published by
``_lakegate_log/<version:020d>.json`` entries, a layout no other engine can read. While such a log
exists its newest entry still defines the table (so those tables keep reading the same through
Lakegate), and the first write through Lakegate converts the table to plain files
(:func:`convert_to_plain`). Without a log, the table is the plain listing (``directory.py``).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from lakegate_client.tables.directory import (
    Snapshot,
    data_files,
    delete_files,
    is_visible,
    list_files,
)

if TYPE_CHECKING:
    import pyarrow.fs as pafs

__all__ = ["LEGACY_DATA_DIR", "LEGACY_LOG_DIR", "convert_to_plain", "current_snapshot"]

LEGACY_LOG_DIR = "_lakegate_log"
LEGACY_DATA_DIR = "_data"


def _legacy(fs: pafs.FileSystem, root: str, files: list[str]) -> Snapshot | None:
    """The newest legacy log entry among ``files`` (a listing of ``root``), if any."""
    logs = sorted(
        rel
        for rel in files
        if rel.startswith(f"{LEGACY_LOG_DIR}/") and rel.count("/") == 1 and rel.endswith(".json")
    )
    if not logs:
        return None
    with fs.open_input_stream(f"{root}/{logs[-1]}") as stream:
        entry = json.loads(stream.read())
    return Snapshot(version=int(entry["version"]), files=tuple(entry["files"]))


def current_snapshot(fs: pafs.FileSystem, root: str, fmt: str,
                     files: list[str] | None = None) -> Snapshot:
    """The table's live files: a legacy log's newest entry if one exists, else the listing
    (``files``: a listing of ``root`` the caller already made, ``list_files``)."""
    files = list_files(fs, root) if files is None else files
    legacy = _legacy(fs, root, files)
    return legacy if legacy is not None else Snapshot(0, tuple(data_files(files, fmt)))


def convert_to_plain(fs: pafs.FileSystem, root: str, fmt: str) -> bool:
    """Rewrite a legacy-layout table as plain files; False if it already is plain.

    Order keeps both kinds of reader right at every step but the last deletes: (1) copy the live
    hidden files to plain names (Lakegate readers still follow the log); (2) delete visible files
    the log no longer lists (an old overwrite left them); (3) delete the log, newest entry last,
    so Lakegate readers switch to the listing only once it is exact; (4) delete ``_data/``.

    A plain table costs one listing of ``_lakegate_log/`` (every Spark write asks), not of the
    whole table.
    """
    if _legacy(fs, root, [f"{LEGACY_LOG_DIR}/{rel}"
                          for rel in list_files(fs, f"{root}/{LEGACY_LOG_DIR}")]) is None:
        return False
    files = list_files(fs, root)
    legacy = _legacy(fs, root, files)
    if legacy is None:
        return False
    for rel in legacy.files:
        if not is_visible(rel):
            write_id = rel.split("/")[1] if rel.startswith(f"{LEGACY_DATA_DIR}/") else "legacy"
            name = rel.rsplit("/", 1)[-1].removeprefix("part-")
            fs.copy_file(f"{root}/{rel}", f"{root}/part-{write_id}-{name}")
    live = set(legacy.files)
    delete_files(fs, root, [rel for rel in data_files(files, fmt) if rel not in live])
    delete_files(fs, root, sorted(r for r in files if r.startswith(f"{LEGACY_LOG_DIR}/")))
    delete_files(fs, root, [r for r in files if r.startswith(f"{LEGACY_DATA_DIR}/")])
    return True
