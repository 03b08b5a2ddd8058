"""Directory tables of ``lakegate_client.tables``: plain files, the old log layout, conversion
(local filesystem, no servers)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pyarrow.fs as pafs
import pytest

from lakegate_client.tables.catalog import split_table_name
from lakegate_client.tables.directory import (
    fs_path,
    is_visible,
    list_data_files,
    new_data_file,
    replace_files,
    write_id_of,
)
from lakegate_client.tables.files import read_file, write_file, write_parquet_batches
from lakegate_client.tables.snapshot import convert_to_plain, current_snapshot

DATA = pa.table({"id": [1, 2, 3], "name": ["a", "b", "c"]})


@pytest.fixture
def root(tmp_path: Path) -> str:
    return str(tmp_path / "table")


@pytest.fixture
def fs() -> pafs.FileSystem:
    return pafs.LocalFileSystem()


def _land(fs: pafs.FileSystem, root: str, relative: str) -> None:
    fs.create_dir(f"{root}/{relative}".rsplit("/", 1)[0], recursive=True)
    write_file(fs, f"{root}/{relative}", DATA, "parquet")


def test_a_table_without_log_is_every_visible_file_of_its_format(
    fs: pafs.FileSystem, root: str
) -> None:
    for rel in ("a.parquet", "day=1/b.parquet", "_tmp/c.parquet", ".hidden.parquet", "d.csv"):
        _land(fs, root, rel)
    assert current_snapshot(fs, root, "parquet").files == ("a.parquet", "day=1/b.parquet")
    assert current_snapshot(fs, root, "parquet").version == 0


def _legacy_commit(fs: pafs.FileSystem, root: str, version: int, files: list[str]) -> None:
    """An entry of the log older Lakegate versions wrote (``_lakegate_log/<version>.json``)."""
    path = f"{root}/_lakegate_log/{version:020d}.json"
    fs.create_dir(path.rsplit("/", 1)[0], recursive=True)
    with fs.open_output_stream(path) as out:
        out.write(json.dumps({"version": version, "files": files}).encode())


def test_new_files_are_plain_files_a_listing_sees(fs: pafs.FileSystem, root: str) -> None:
    _land(fs, root, "landed.parquet")
    written = new_data_file("w1", 0, "parquet")
    assert "/" not in written
    assert written.startswith("part-w1-")
    _land(fs, root, written)
    assert current_snapshot(fs, root, "parquet").files == tuple(sorted([written, "landed.parquet"]))
    assert write_id_of(written) == "w1"
    assert write_id_of("landed.parquet") is None


def test_a_legacy_log_still_defines_the_table_and_later_versions_win(
    fs: pafs.FileSystem, root: str
) -> None:
    _land(fs, root, "landed.parquet")
    first, second = "_data/w1/part-00000-a.parquet", "_data/w2/part-00000-b.parquet"
    _land(fs, root, first)
    _legacy_commit(fs, root, 1, ["landed.parquet", first])
    assert current_snapshot(fs, root, "parquet").files == ("landed.parquet", first)
    _land(fs, root, second)
    _legacy_commit(fs, root, 2, [second])  # an old overwrite: landed.parquet is dead
    assert current_snapshot(fs, root, "parquet").files == (second,)
    assert current_snapshot(fs, root, "parquet").version == 2


def test_converting_a_legacy_table_keeps_its_rows_as_plain_files(
    fs: pafs.FileSystem, root: str
) -> None:
    _land(fs, root, "dead.parquet")
    _land(fs, root, "kept.parquet")
    _land(fs, root, "_data/w2/part-00000-b.parquet")
    _legacy_commit(fs, root, 1, ["dead.parquet"])
    _legacy_commit(fs, root, 2, ["kept.parquet", "_data/w2/part-00000-b.parquet"])

    assert convert_to_plain(fs, root, "parquet")

    assert list_data_files(fs, root, "parquet") == ["kept.parquet", "part-w2-00000-b.parquet"]
    listing = fs.get_file_info(pafs.FileSelector(root, recursive=True))
    hidden = [i.path for i in listing if i.is_file and not is_visible(i.path[len(root) + 1 :])]
    assert hidden == []  # no _data/ or _lakegate_log/ file left
    assert current_snapshot(fs, root, "parquet").version == 0
    assert not convert_to_plain(fs, root, "parquet")  # already plain: nothing to do


def test_append_keeps_old_files_and_drops_only_this_jobs_unreported_attempts(
    fs: pafs.FileSystem, root: str
) -> None:
    old, other_job = "old.parquet", new_data_file("w8", 0, "parquet")
    mine, failed_attempt = new_data_file("w9", 0, "parquet"), new_data_file("w9", 1, "parquet")
    for rel in (old, mine, failed_attempt, other_job):
        _land(fs, root, rel)
    deleted = replace_files(fs, root, "parquet", [mine], overwrite=False, write_id="w9")
    assert deleted == [failed_attempt]
    assert list_data_files(fs, root, "parquet") == sorted([old, mine, other_job])


def test_overwrite_deletes_every_other_data_file_after_the_new_ones_exist(
    fs: pafs.FileSystem, root: str
) -> None:
    new = new_data_file("w2", 0, "parquet")
    for rel in ("old.parquet", "day=1/older.parquet", new):
        _land(fs, root, rel)
    with fs.open_output_stream(f"{root}/notes.txt") as out:
        out.write(b"not data")
    replace_files(fs, root, "parquet", [new], overwrite=True, write_id="w2")
    assert list_data_files(fs, root, "parquet") == [new]
    assert fs.get_file_info(f"{root}/notes.txt").is_file  # not a data file: left alone


@pytest.mark.parametrize("fmt", ["parquet", "csv", "json"])
def test_each_directory_format_round_trips_one_file(
    fs: pafs.FileSystem, root: str, fmt: str
) -> None:
    path = f"{root}/{new_data_file('w', 3, fmt)}"
    fs.create_dir(root, recursive=True)
    assert write_file(fs, path, DATA, fmt) > 0
    assert read_file(fs, path, fmt).to_pylist() == DATA.to_pylist()


def test_streamed_batches_land_in_one_parquet_file(fs: pafs.FileSystem, root: str) -> None:
    path = f"{root}/{new_data_file('w', 0, 'parquet')}"
    batches = DATA.to_batches(max_chunksize=1)
    assert len(batches) == 3
    assert write_parquet_batches(fs, path, DATA.schema, iter(batches)) > 0
    assert read_file(fs, path, "parquet").to_pylist() == DATA.to_pylist()


def test_paths_and_names_are_parsed_the_catalog_way() -> None:
    assert fs_path("s3://warehouse/a/b") == "warehouse/a/b"
    assert fs_path("file:///tmp/x/") == "/tmp/x"  # noqa: S108 - a path string, no file
    # ADLS names the account in the authority; AzureFileSystem wants container/key.
    assert fs_path("abfss://fs@acct.dfs.core.windows.net/a/b/") == "fs/a/b"
    assert fs_path("wasbs://fs@acct.blob.core.windows.net/a") == "fs/a"
    assert fs_path("gs://bucket/a/b") == "bucket/a/b"
    assert split_table_name("a.b.t") == (("a", "b"), "t")
    assert not is_visible("_data/w/part.parquet")
    assert is_visible("year=2026/part.parquet")
    with pytest.raises(ValueError, match=r"namespace\.table"):
        split_table_name("justatable")


def test_a_stream_that_fails_midway_leaves_no_partial_file(fs: pafs.FileSystem, root: str) -> None:
    path = f"{root}/{new_data_file('w', 0, 'parquet')}"

    def failing() -> Iterator[pa.RecordBatch]:
        yield DATA.to_batches()[0]
        raise RuntimeError("the task failed mid-write")

    with pytest.raises(RuntimeError, match="mid-write"):
        write_parquet_batches(fs, path, DATA.schema, failing())
    assert not fs.get_file_info(path).is_file
    assert list_data_files(fs, root, "parquet") == []


class _Listings:
    """A local filesystem that records what is listed (``get_file_info`` selectors)."""

    def __init__(self, fs: pafs.FileSystem) -> None:
        self._fs = fs
        self.listed: list[str] = []

    def get_file_info(self, what: object) -> object:
        if isinstance(what, pafs.FileSelector):
            self.listed.append(what.base_dir)
        return self._fs.get_file_info(what)

    def __getattr__(self, name: str) -> object:
        return getattr(self._fs, name)


def test_a_plain_table_is_not_listed_whole_to_learn_it_has_no_legacy_log(
    fs: pafs.FileSystem, root: str
) -> None:
    """Every Spark write of a directory table asks whether it is in the old layout; that listed
    every file of the table (pages of 1,000, growing with every append) to look for
    ``_lakegate_log/`` (issue 36). Now only that folder is listed; a legacy table is still
    found and converted."""
    for i in range(3):
        _land(fs, root, f"part-w-{i:05d}-r.parquet")
    spy = _Listings(fs)
    assert not convert_to_plain(spy, root, "parquet")  # type: ignore[arg-type]
    assert spy.listed == [f"{root}/_lakegate_log"]
    _legacy_commit(fs, root, 1, ["part-w-00000-r.parquet"])
    assert convert_to_plain(spy, root, "parquet")  # type: ignore[arg-type]
    assert list_data_files(fs, root, "parquet") == ["part-w-00000-r.parquet"]
